 (:fuzzBHR
data-00000-of-000020R
data-00001-of-00002Z:
dense_0/kernelfloat32"*data-00000-of-00002(0Z7
dense_0/biasfloat32"*data-00001-of-00002(0