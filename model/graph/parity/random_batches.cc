#include "model/graph/parity/random_batches.h"

#include "common/splitmix64.h"

namespace psflow {
namespace {

// In [0, 1), from the top 24 bits (every value exact in a float).
float Unit(uint64_t& state) {
  return static_cast<float>(SplitMix64(state) >> 40) * (1.0f / (1 << 24));
}

int BagSize(uint64_t& state) {
  const uint64_t r = SplitMix64(state) % 10;
  return r == 0 ? 0 : r <= 2 ? 2 : 1;
}

}  // namespace

int64_t VocabularySize(const InputSpec& input,
                       const RandomBatchOptions& options) {
  return int64_t{input.num_fields} * options.ids_per_field;
}

RandomBatch DrawRandomBatch(const InputSpec& input,
                            const RandomBatchOptions& options,
                            uint64_t& state) {
  RandomBatch batch;
  batch.size = options.size;
  batch.features.resize(options.size * input.num_features());
  for (float& x : batch.features) x = options.max_dense * Unit(state);
  batch.labels.resize(options.size);
  for (int32_t& y : batch.labels) {
    y = static_cast<int32_t>(SplitMix64(state) & 1);
  }
  for (int64_t i = 0; i < options.size; ++i) {
    for (int f = 0; f < input.num_fields; ++f) {
      const int n = BagSize(state);
      for (int k = 0; k < n; ++k) {
        const int64_t value = SplitMix64(state) % options.ids_per_field;
        batch.ids.push_back(int64_t{f} * options.ids_per_field + value);
      }
      batch.offsets.push_back(static_cast<int64_t>(batch.ids.size()));
    }
  }
  return batch;
}

std::vector<float> UniformValues(int64_t count, float scale, uint64_t& state) {
  std::vector<float> values(count);
  for (float& x : values) x = scale * (2.0f * Unit(state) - 1.0f);
  return values;
}

}  // namespace psflow
