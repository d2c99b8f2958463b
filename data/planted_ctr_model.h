// The planted logistic model behind synthetic click-through-rate data
// (data/synth_ctr.h): the true click probability of an example is
//
//   p = sigmoid(bias + sum_d dense_weight(d) * dense_d + sum_id weight(id))
//
// over its dense features (CtrDenseFeature values, missing = 0) and the
// ids of its categorical values (CtrFeatureId; a missing value adds
// nothing). weight(id) ~ N(0, weight_scale^2) and dense_weight(d) ~
// N(0, (weight_scale / 2)^2) are derived from (seed, id) and (seed, d) by
// hashing, so the model needs no memory for its millions of weights and
// anyone holding the seed (and the bias) can recompute p from the data as
// read back. No model can rank examples better than p does: its AUC on
// held-out data is the best achievable.
//
// Immutable after construction; share it between threads freely.
#ifndef PSFLOW_DATA_PLANTED_CTR_MODEL_H_
#define PSFLOW_DATA_PLANTED_CTR_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace psflow {

class PlantedCtrModel {
 public:
  PlantedCtrModel(uint64_t seed, int num_dense, double weight_scale,
                  double bias);

  double CategoricalWeight(int64_t id) const;
  double DenseWeight(int d) const { return dense_weights_[d]; }
  double bias() const { return bias_; }

  // The logit of an example: `dense` holds num_dense features, `ids` every
  // id of the example (any order gives the same sum up to rounding; the
  // generator and CtrExamples::IdsOf both list them field by field, so
  // their results agree to the bit).
  double Logit(absl::Span<const float> dense,
               absl::Span<const int64_t> ids) const;
  // sigmoid(Logit(...)) as a float, the score data sets are ranked by.
  float Probability(absl::Span<const float> dense,
                    absl::Span<const int64_t> ids) const;

  static double Sigmoid(double logit);

 private:
  uint64_t key_;  // mixed from the seed
  double weight_scale_;
  std::vector<double> dense_weights_;
  double bias_;
};

// A standard normal variate from 64 hashed bits (Box-Muller); the same bits
// give the same value everywhere.
double StandardNormalFromHash(uint64_t bits);

}  // namespace psflow

#endif  // PSFLOW_DATA_PLANTED_CTR_MODEL_H_
