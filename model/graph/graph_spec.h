// A `model.graph` (proto/job_config.proto GraphConfig, Keras' functional
// API) checked and resolved: every input's and node's shape inferred from
// the data's, nodes in an order where each follows what it reads, tables
// with their dimensions, the variables of every layer. A mistake is an
// InvalidArgument naming the input or node, the shapes involved and the
// fix, before any task starts: unknown inputs, cycles, nodes or inputs the
// output never uses, shapes that do not fit a layer, a table used with two
// dimensions, a loss that does not fit the output or the data.
//
// Values are numbered: the graph's inputs first (0 .. inputs-1, in config
// order), then the nodes in `nodes` order (inputs.size() + k).
//
// Stateless; a GraphSpec is immutable once built.
#ifndef PSFLOW_MODEL_GRAPH_GRAPH_SPEC_H_
#define PSFLOW_MODEL_GRAPH_GRAPH_SPEC_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/layers/layer.h"
#include "model/model.h"
#include "proto/job_config.pb.h"
#include "proto/ps.pb.h"

namespace psflow {

enum class Pooling { kSum, kMean };

struct GraphInput {
  enum class Kind { kFeatures, kCategorical };
  std::string name;
  Kind kind = Kind::kFeatures;
  Shape shape;
  // kCategorical: the data's field, the table (index into
  // GraphSpec::tables) and how the field's ids are pooled.
  int field = -1;
  int table = -1;
  Pooling pooling = Pooling::kSum;
};

// What a node computes.
enum class NodeKind {
  kLayer,  // a single-input layer of model/layers/ (Dense, Conv2D, ...)
  kConcatenate,
  kAdd,
  kMultiply,
  kDotInteraction,
  kCross,
  kFactorizationMachine,
};

struct GraphNode {
  std::string name;
  NodeKind kind = NodeKind::kLayer;
  std::string layer_class;  // Keras' name, e.g. "DotInteraction"
  std::vector<int> inputs;  // value numbers (see above)
  std::vector<Shape> input_shapes;
  Shape output;
  // kLayer: the layer, built for its input shape.
  std::shared_ptr<const Layer> layer;
  // kConcatenate: the axis, counted from the first dimension.
  int axis = 0;
  // kDotInteraction, kFactorizationMachine: the fields (F) and their width
  // (d) the inputs make up.
  int64_t fields = 0;
  int64_t width = 0;
  bool self_interaction = false;
  // kCross: 0 full rank.
  int64_t projection_dim = 0;
  bool use_bias = true;
  // Named "<node>/<variable>".
  std::vector<ModelVariable> variables;
};

struct GraphSpec {
  std::vector<GraphInput> inputs;
  // The tables the categorical inputs read, in first-use order, each with
  // its dimension and the settings `tables` gave it.
  std::vector<EmbeddingTableSpec> tables;
  // Each node after the nodes it reads.
  std::vector<GraphNode> nodes;
  int output = -1;  // a value number: the output node's
  GraphConfig::Output::Loss loss = GraphConfig::Output::LOSS_UNSPECIFIED;

  int num_values() const {
    return static_cast<int>(inputs.size() + nodes.size());
  }
  const Shape& shape(int value) const;
  const std::string& name(int value) const;
  // Every node's variables, in `nodes` order.
  std::vector<ModelVariable> Variables() const;
  // One line per input and node, e.g. "interact (DotInteraction) <- bottom,
  // C1, C2 -> 3".
  std::string Describe() const;
};

// The checks that need no data: names, inputs' settings, tables,
// references, cycles, nodes and inputs the output never uses, the loss
// named. BuildGraphSpec makes them too.
absl::Status ValidateGraphConfig(const GraphConfig& graph);

// `graph` for examples of `data` (its example shape, classes and
// categorical fields).
absl::StatusOr<GraphSpec> BuildGraphSpec(const GraphConfig& graph,
                                         const InputSpec& data);

}  // namespace psflow

#endif  // PSFLOW_MODEL_GRAPH_GRAPH_SPEC_H_
