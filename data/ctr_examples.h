// Click-through-rate (CTR) examples in memory: a label, dense (integer)
// features and multi-hot categorical features as int64 ids, the shape that
// embedding tables take (docs/data.md). Readers such as data/criteo.h fill
// it; the shard one worker trains on is CtrShardOf.
//
// Immutable after loading; share it between threads freely.
#ifndef PSFLOW_DATA_CTR_EXAMPLES_H_
#define PSFLOW_DATA_CTR_EXAMPLES_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "common/splitmix64.h"

namespace psflow {

struct CtrExamples {
  int num_dense = 13;   // integer columns
  int num_fields = 26;  // categorical columns
  int64_t num_examples = 0;
  // num_examples x num_dense, row-major: CtrDenseFeature(x); missing -> 0.
  std::vector<float> dense;
  // num_examples, 0 or 1.
  std::vector<uint8_t> labels;
  // Multi-hot ready: field f of example i holds
  // ids[offsets[i * num_fields + f] .. offsets[i * num_fields + f + 1]).
  // A missing categorical value is an empty bag (no id). offsets[0] is 0
  // and offsets.back() is ids.size().
  std::vector<int64_t> offsets;  // num_examples * num_fields + 1
  std::vector<int64_t> ids;      // CtrFeatureId values

  // The ids of field `field` of example `example`.
  absl::Span<const int64_t> Bag(int64_t example, int field) const {
    const int64_t k = example * num_fields + field;
    return absl::MakeConstSpan(ids.data() + offsets[k],
                               ids.data() + offsets[k + 1]);
  }
  // Every id of example `example`, field by field.
  absl::Span<const int64_t> IdsOf(int64_t example) const {
    return absl::MakeConstSpan(
        ids.data() + offsets[example * num_fields],
        ids.data() + offsets[(example + 1) * num_fields]);
  }
  absl::Span<const float> DenseOf(int64_t example) const {
    return absl::MakeConstSpan(dense.data() + example * num_dense,
                               static_cast<size_t>(num_dense));
  }
};

// Fields are numbered 0..kMaxCtrFields-1: the field sits in bits 48..62 of
// an id, so every id is non-negative.
inline constexpr int kMaxCtrFields = 1 << 15;
inline constexpr int kCtrFieldShift = 48;
inline constexpr uint64_t kCtrValueMask = (uint64_t{1} << kCtrFieldShift) - 1;

// The id of categorical value `value` (e.g. the 64-bit number a Criteo hex
// string spells) in field `field` (0-based, < kMaxCtrFields):
//
//   id = (int64(field) << 48) | (SplitMix64Mix(value) & (2^48 - 1))
//
// Non-negative; ids of different fields never collide; within a field two
// values collide with probability 2^-48 per pair (about 0.2 expected
// collisions among 10 million values). Stable: part of the data format.
inline int64_t CtrFeatureId(int field, uint64_t value) {
  return static_cast<int64_t>((static_cast<uint64_t>(field) << kCtrFieldShift) |
                              (SplitMix64Mix(value) & kCtrValueMask));
}

// The field an id belongs to.
inline int CtrFieldOf(int64_t id) {
  return static_cast<int>(static_cast<uint64_t>(id) >> kCtrFieldShift);
}

// The dense transform: log(1 + max(x, 0)) as a float, so counts spanning
// many orders of magnitude become inputs of order 1 (Criteo's integer
// features are mostly counts; negative values carry no magnitude).
inline float CtrDenseFeature(int64_t x) {
  return x <= 0 ? 0.0f : static_cast<float>(std::log1p(static_cast<double>(x)));
}

// Worker `index` of `count` trains on examples index, index + count, ...
// (every example in exactly one shard; sizes differ by at most one).
// Requires 0 <= index < count (CHECKed: callers validate TF_CONFIG first).
CtrExamples CtrShardOf(const CtrExamples& examples, int index, int count);

}  // namespace psflow

#endif  // PSFLOW_DATA_CTR_EXAMPLES_H_
