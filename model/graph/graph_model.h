// A `model.graph` network (graph_spec.h) as a ModelDefinition: the nodes'
// kernels (node_kernels.h) run in the spec's order, forward, then
// backward in reverse, where a value read by several nodes gathers every
// reader's share of its gradient. Losses: softmax cross-entropy over the
// output's class logits (on the device), or sigmoid cross-entropy on one
// logit (binary data; on the host, where the batch's few logits are).
//
// Categorical inputs pool their field's rows from the batch's
// SparseBatch (sum or mean) on the host and hand their gradients back per
// distinct id (SparseBatch::row_gradients); a Concatenate or Add of
// inputs that no other node reads runs on the host whole (host_nodes.h).
//
// A training batch's gradient_ready (model/model.h) hears of each node's
// variables as backward finishes that node, the last node's first: on the
// CPU at once (its downloads are synchronous), on a device that queues
// work (CUDA) all together after the step's final Synchronize, since a
// span is written only once the device is done with it.
//
// Variables are the nodes' in order ("<node>/kernel", ...). The graph
// scales nothing itself: like a `model.layers` network, it gets the data's
// values as they are (use a Rescaling node for raw pixels).
//
// The other model kinds (mlp, softmax_regression, layers, wide_deep) are
// graphs too (legacy_graphs.h): GraphOptions keeps what such a kind
// promised beyond its graph (its variables' names and initializers, the
// reader's pixel scaling, its description).
//
// GraphDefinition is immutable; a model is used by one thread at a time.
#ifndef PSFLOW_MODEL_GRAPH_GRAPH_MODEL_H_
#define PSFLOW_MODEL_GRAPH_GRAPH_MODEL_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/graph/graph_spec.h"
#include "model/model.h"
#include "proto/job_config.pb.h"

namespace psflow {

// What a graph standing for another model kind keeps of that kind.
struct GraphOptions {
  // The features input's shape when not the data's, with as many values
  // (the MLP reads an image as one vector). Empty: the data's.
  Shape features_shape;
  // ModelDefinition::feature_scale (the MLP's 1/255).
  float feature_scale = 1.0f;
  // Describe()'s line; empty: the graph's own.
  std::string description;
  // Variables under another name than "<node>/<variable>": the graph's
  // name -> the kind's ("deep_0/kernel" -> "deep/dense_0/kernel").
  std::map<std::string, std::string> variable_names;
  // Initializers other than the layers' own, by the graph's name.
  std::map<std::string, Initializer> initializers;
};

class GraphDefinition final : public ModelDefinition {
 public:
  // InvalidArgument naming the input or node for any mistake
  // (graph_spec.h), or an option naming no variable of the graph.
  static absl::StatusOr<std::unique_ptr<GraphDefinition>> Create(
      const GraphConfig& graph, const InputSpec& input,
      const GraphOptions& options = {});

  std::string Describe() const override;
  float feature_scale() const override { return feature_scale_; }
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
  GraphDefinition(const InputSpec& input, GraphSpec spec,
                  const GraphOptions& options);

  const GraphSpec spec_;
  const float feature_scale_;
  const std::string description_;
  std::vector<ModelVariable> variables_;
  std::vector<ModelTable> tables_;
};

}  // namespace psflow

#endif  // PSFLOW_MODEL_GRAPH_GRAPH_MODEL_H_
