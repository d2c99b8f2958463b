// The host side of a graph with categorical inputs: pooling a field's
// pulled rows per example and handing the pooled value's gradient back to
// those rows, and the nodes cheaper to compute on the host than on the
// device.
//
// A node that only joins (Concatenate of [d] values) or sums (Add) graph
// inputs, at least one of them categorical and read by no other node, runs
// here: its rows are pooled straight into its output and its gradient
// scattered straight from its output's, one upload and one download for
// the node instead of one per input plus the device copies. That is the
// wide-and-deep model's deep input (26 embeddings and the dense features)
// and its wide part (26 linear rows summed), and DCN's and DeepFM's deep
// inputs.
//
// Stateless functions and an immutable plan; thread-safe.
#ifndef PSFLOW_MODEL_GRAPH_HOST_NODES_H_
#define PSFLOW_MODEL_GRAPH_HOST_NODES_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "model/graph/graph_spec.h"
#include "model/model.h"

namespace psflow {

// Pools categorical input `value`'s rows for every example of a batch of
// `size` into out[i * stride + offset ...] (its dim values), overwriting
// them, or adding to them when `add`. An empty bag pools to zeros.
// Returns false when an id has no row in the input's table (slot -1).
bool PoolInput(const GraphSpec& spec, const SparseBatch& sparse, int64_t size,
               int value, bool add, int64_t stride, int64_t offset, float* out);

// The gradient of that pooled value, grad[i * stride + offset ...], added
// onto the rows it was pooled from (sparse.row_gradients).
void ScatterInput(const GraphSpec& spec, const SparseBatch& sparse,
                  int64_t size, int value, int64_t stride, int64_t offset,
                  const float* grad);

class HostNodes {
 public:
  explicit HostNodes(const GraphSpec& spec);

  // Whether node k (spec.nodes order) runs on the host.
  bool on_host(size_t k) const { return on_host_[k]; }
  // Whether categorical input `value` is pooled by a host node, so it has
  // no value of its own on the device.
  bool fused(int value) const { return fused_[value]; }

  // Node k's output for a batch into out (size x its output).
  // InvalidArgument when a row is missing.
  absl::Status Forward(const GraphSpec& spec, size_t k,
                       const ExampleBatch& batch, absl::Span<float> out) const;
  // Node k's output gradient dy (size x its output) onto its categorical
  // inputs' rows.
  void Backward(const GraphSpec& spec, size_t k, const ExampleBatch& batch,
                absl::Span<const float> dy) const;

 private:
  std::vector<bool> on_host_;  // per node
  std::vector<bool> fused_;    // per value
};

}  // namespace psflow

#endif  // PSFLOW_MODEL_GRAPH_HOST_NODES_H_
