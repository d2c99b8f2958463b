// The checks a batch passes before a graph model (graph_model.h) runs
// it: its size, its features and labels, and for a graph with tables its
// sparse features, their rows and (training) the row gradients' buffers.
//
// Stateless; thread-safe.
#ifndef PSFLOW_MODEL_GRAPH_GRAPH_BATCH_H_
#define PSFLOW_MODEL_GRAPH_GRAPH_BATCH_H_

#include <cstdint>

#include "absl/status/status.h"
#include "model/graph/graph_spec.h"
#include "model/model.h"

namespace psflow {

// InvalidArgument saying what is wrong with `batch` for a model of `spec`
// built for `input` and batches of up to `max_batch` examples.
absl::Status CheckGraphBatch(const GraphSpec& spec, const InputSpec& input,
                             int64_t max_batch, const ExampleBatch& batch,
                             bool training);

}  // namespace psflow

#endif  // PSFLOW_MODEL_GRAPH_GRAPH_BATCH_H_
