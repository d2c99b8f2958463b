// Deterministic random CRITEO-shaped batches for checking a graph model
// against another implementation of the same graph (torch_parity_test.sh):
// dense features in the range the reader's log(1 + x) transform gives,
// 0/1 labels, and a bag of ids per categorical field drawn from a small
// vocabulary of its own, so ids recur across examples and steps (a row
// then gathers several examples' gradients, as in real batches) and
// pooling sees empty, single and multi-id bags.
//
// Ids are vocabulary indices: field f's ids are f * ids_per_field + k, so
// a table can be held as a dense [num_ids, dim] array on both sides.
//
// Stateless functions; the caller owns the generator state.
#ifndef PSFLOW_MODEL_GRAPH_PARITY_RANDOM_BATCHES_H_
#define PSFLOW_MODEL_GRAPH_PARITY_RANDOM_BATCHES_H_

#include <cstdint>
#include <vector>

#include "model/model.h"

namespace psflow {

struct RandomBatchOptions {
  int64_t size = 16;       // examples per batch
  int ids_per_field = 4;   // a field's vocabulary
  float max_dense = 4.0f;  // dense features are uniform in [0, max_dense)
};

// One batch: the arrays a SparseBatch points into, with ids as above.
struct RandomBatch {
  int64_t size = 0;
  std::vector<float> features;  // size x num_features
  std::vector<int32_t> labels;
  // Example i's field f: ids[offsets[i * num_fields + f] .. + 1).
  std::vector<int64_t> offsets = {0};
  std::vector<int64_t> ids;
};

// The ids a batch of `input` can hold: num_fields * ids_per_field.
int64_t VocabularySize(const InputSpec& input,
                       const RandomBatchOptions& options);

// A batch for `input` (dense features and num_fields bags per example;
// labels 0/1). Bags hold 0 ids one time in ten, 2 one time in five, and
// 1 otherwise. Advances `state` (a SplitMix64 state).
RandomBatch DrawRandomBatch(const InputSpec& input,
                            const RandomBatchOptions& options, uint64_t& state);

// Uniform in [-scale, scale): `count` draws from `state`.
std::vector<float> UniformValues(int64_t count, float scale, uint64_t& state);

}  // namespace psflow

#endif  // PSFLOW_MODEL_GRAPH_PARITY_RANDOM_BATCHES_H_
