#include "data/ctr_examples.h"

#include "common/logging.h"

namespace psflow {

CtrExamples CtrShardOf(const CtrExamples& examples, int index, int count) {
  CHECK(count > 0 && index >= 0 && index < count)
      << "CtrShardOf(" << index << ", " << count << ")";
  CtrExamples shard;
  shard.num_dense = examples.num_dense;
  shard.num_fields = examples.num_fields;
  const int64_t n = examples.num_examples > index
                        ? (examples.num_examples - index + count - 1) / count
                        : 0;
  shard.num_examples = n;
  shard.labels.reserve(n);
  shard.dense.reserve(n * examples.num_dense);
  shard.offsets.reserve(n * examples.num_fields + 1);
  shard.offsets.push_back(0);
  for (int64_t i = index; i < examples.num_examples; i += count) {
    shard.labels.push_back(examples.labels[i]);
    const absl::Span<const float> dense = examples.DenseOf(i);
    shard.dense.insert(shard.dense.end(), dense.begin(), dense.end());
    for (int f = 0; f < examples.num_fields; ++f) {
      const absl::Span<const int64_t> bag = examples.Bag(i, f);
      shard.ids.insert(shard.ids.end(), bag.begin(), bag.end());
      shard.offsets.push_back(static_cast<int64_t>(shard.ids.size()));
    }
  }
  return shard;
}

}  // namespace psflow
