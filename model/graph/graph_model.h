// A `model.graph` network (graph_spec.h) as a ModelDefinition: the nodes'
// kernels (node_kernels.h) run in the spec's order, forward, then
// backward in reverse, where a value read by several nodes gathers every
// reader's share of its gradient. Losses: softmax cross-entropy over the
// output's class logits (on the device), or sigmoid cross-entropy on one
// logit (binary data; on the host, where the batch's few logits are).
//
// Categorical inputs pool their field's rows from the batch's
// SparseBatch (sum or mean) on the host and hand their gradients back per
// distinct id (SparseBatch::row_gradients), as the wide-and-deep model
// does.
//
// Variables are the nodes' in order ("<node>/kernel", ...). The graph
// scales nothing itself: like a `model.layers` network, it gets the data's
// values as they are (use a Rescaling node for raw pixels).
//
// GraphDefinition is immutable; a model is used by one thread at a time.
#ifndef PSFLOW_MODEL_GRAPH_GRAPH_MODEL_H_
#define PSFLOW_MODEL_GRAPH_GRAPH_MODEL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/graph/graph_spec.h"
#include "model/model.h"
#include "proto/job_config.pb.h"

namespace psflow {

class GraphDefinition final : public ModelDefinition {
 public:
  // InvalidArgument naming the input or node for any mistake
  // (graph_spec.h).
  static absl::StatusOr<std::unique_ptr<GraphDefinition>> Create(
      const GraphConfig& graph, const InputSpec& input);

  std::string Describe() const override;
  float feature_scale() const override { return 1.0f; }
  const std::vector<ModelVariable>& variables() const override {
    return variables_;
  }
  const std::vector<ModelTable>& tables() const override { return tables_; }
  bool binary() const override;
  std::vector<ModelPart> MemoryParts() const override;
  absl::StatusOr<std::unique_ptr<Model>> Instantiate(
      Device* device, int64_t max_batch) const override;

  const GraphSpec& spec() const { return spec_; }

 private:
  GraphDefinition(const InputSpec& input, GraphSpec spec);

  const GraphSpec spec_;
  std::vector<ModelVariable> variables_;
  std::vector<ModelTable> tables_;
};

}  // namespace psflow

#endif  // PSFLOW_MODEL_GRAPH_GRAPH_MODEL_H_
