#include "model/graph/graph_spec.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "model/layers/layer_factory.h"

namespace psflow {
namespace {

constexpr int kMaxTableDim = 4096;
constexpr int64_t kMaxValuesPerExample = int64_t{1} << 28;
constexpr int64_t kMaxInteractionFields = 1024;
constexpr int64_t kMaxVariableElements = int64_t{1} << 31;

std::string Quoted(const std::string& s) { return absl::StrCat("\"", s, "\""); }

std::string ShapeList(const std::vector<Shape>& shapes) {
  return absl::StrJoin(shapes, ", ", [](std::string* out, const Shape& s) {
    absl::StrAppend(out, ShapeString(s));
  });
}

ModelVariable Variable(const std::string& node, const std::string& suffix,
                       Shape shape, Initializer initializer) {
  ModelVariable v;
  v.variable.name = absl::StrCat(node, "/", suffix);
  v.variable.shape = std::move(shape);
  v.initializer = initializer;
  return v;
}

absl::StatusOr<NodeKind> KindOf(const LayerConfig& layer) {
  switch (layer.kind_case()) {
    case LayerConfig::kConcatenate:
      return NodeKind::kConcatenate;
    case LayerConfig::kAdd:
      return NodeKind::kAdd;
    case LayerConfig::kMultiply:
      return NodeKind::kMultiply;
    case LayerConfig::kDotInteraction:
      return NodeKind::kDotInteraction;
    case LayerConfig::kCross:
      return NodeKind::kCross;
    case LayerConfig::kFactorizationMachine:
      return NodeKind::kFactorizationMachine;
    case LayerConfig::KIND_NOT_SET:
      return absl::InvalidArgumentError(
          "names no layer class; write e.g. \"layer\": {\"Dense\": "
          "{\"units\": 64, \"activation\": \"relu\"}}");
    default:
      return NodeKind::kLayer;
  }
}

class GraphBuilder {
 public:
  // Without `data`, only the checks that need none (ValidateGraphConfig).
  GraphBuilder(const GraphConfig& graph, const InputSpec* data)
      : graph_(graph),
        data_(data != nullptr ? *data : kNoData),
        have_data_(data != nullptr) {}

  absl::StatusOr<GraphSpec> Build() {
    if (graph_.inputs().empty() || graph_.nodes().empty()) {
      return absl::InvalidArgumentError(
          "model.graph needs inputs, nodes and an output; e.g. inputs "
          "[{\"name\": \"features\", \"features\": {}}], nodes [{\"name\": "
          "\"logits\", \"inputs\": [\"features\"], \"layer\": {\"Dense\": "
          "{\"units\": 10}}}], output {\"node\": \"logits\", \"loss\": "
          "\"SOFTMAX_CROSS_ENTROPY\"}");
    }
    RETURN_IF_ERROR(ResolveInputs());
    RETURN_IF_ERROR(ApplyTableSettings());
    RETURN_IF_ERROR(NameNodes());
    RETURN_IF_ERROR(ResolveReferences());
    ASSIGN_OR_RETURN(const int output, OutputNode());
    ASSIGN_OR_RETURN(std::vector<int> order, Order());
    RETURN_IF_ERROR(CheckEverythingUsed(output));
    if (!have_data_) {
      if (graph_.output().loss() == GraphConfig::Output::LOSS_UNSPECIFIED) {
        return absl::InvalidArgumentError(
            "model.graph.output.loss is missing; \"SOFTMAX_CROSS_ENTROPY\" "
            "(classes) or \"SIGMOID_CROSS_ENTROPY\" (click-through rate)");
      }
      return GraphSpec();
    }
    std::vector<int> value_of_node(graph_.nodes_size());
    for (size_t k = 0; k < order.size(); ++k) {
      value_of_node[order[k]] = static_cast<int>(spec_.inputs.size() + k);
    }
    for (int n : order) {
      RETURN_IF_ERROR(BuildNode(n, value_of_node));
    }
    spec_.output = value_of_node[output];
    RETURN_IF_ERROR(CheckLoss(output));
    return std::move(spec_);
  }

 private:
  std::string InputWhere(int i) const {
    return absl::StrCat("model.graph.inputs[", i, "] ",
                        Quoted(graph_.inputs(i).name()));
  }
  std::string NodeWhere(int n) const {
    const GraphConfig::Node& node = graph_.nodes(n);
    return absl::StrCat(
        "model.graph.nodes[", n, "] ", Quoted(node.name()),
        node.layer().kind_case() == LayerConfig::KIND_NOT_SET
            ? ""
            : absl::StrCat(" (", LayerClassName(node.layer()), ")"));
  }
  static absl::Status Bad(const std::string& where,
                          const std::string& problem) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", problem));
  }

  absl::Status CheckName(const std::string& where, const std::string& name) {
    if (!ValidLayerName(name)) {
      return Bad(where, absl::StrCat("name ", Quoted(name),
                                     " must be 1 to 64 letters, digits, '_', "
                                     "'-' or '.'"));
    }
    auto [it, inserted] = names_.emplace(name, where);
    if (!inserted) {
      return Bad(where, absl::StrCat("name ", Quoted(name), " is taken by ",
                                     it->second,
                                     "; inputs and nodes need distinct names"));
    }
    return absl::OkStatus();
  }

  // ---- Inputs and tables ---------------------------------------------------

  absl::Status ResolveInputs() {
    bool have_features = false;
    for (int i = 0; i < graph_.inputs_size(); ++i) {
      const GraphConfig::Input& config = graph_.inputs(i);
      const std::string where = InputWhere(i);
      RETURN_IF_ERROR(CheckName(where, config.name()));
      GraphInput input;
      input.name = config.name();
      if (config.has_features()) {
        if (have_features) {
          return Bad(where,
                     "a second features input; the example's features are "
                     "one input (read it from several nodes instead)");
        }
        have_features = true;
        input.kind = GraphInput::Kind::kFeatures;
        input.shape = data_.example_shape;
        if (input.shape.size() == 2) input.shape.push_back(1);  // a channel
      } else if (config.has_categorical()) {
        RETURN_IF_ERROR(ResolveCategorical(where, config.categorical(), input));
      } else {
        return Bad(where,
                   "says neither \"features\": {} nor \"categorical\": "
                   "{\"field\": ..., \"dim\": ...}");
      }
      value_of_name_[input.name] = i;
      spec_.inputs.push_back(std::move(input));
    }
    return absl::OkStatus();
  }

  absl::Status ResolveCategorical(const std::string& where,
                                  const GraphConfig::Input::Categorical& c,
                                  GraphInput& input) {
    if (have_data_ && data_.num_fields == 0) {
      return Bad(where,
                 "the data has no categorical fields (data.format CRITEO "
                 "has them); remove the input or use CRITEO data");
    }
    if (c.field() < 0 || (have_data_ && c.field() >= data_.num_fields)) {
      return Bad(where,
                 absl::StrCat("field ", c.field(), " is not among the data's ",
                              data_.num_fields, " categorical fields (0 to ",
                              data_.num_fields - 1, ")"));
    }
    if (c.dim() < 1 || c.dim() > kMaxTableDim) {
      return Bad(where, absl::StrCat("dim ", c.dim(), " must be 1 to ",
                                     kMaxTableDim, " floats per id"));
    }
    const std::string pooling = absl::AsciiStrToLower(c.pooling());
    if (pooling.empty() || pooling == "sum") {
      input.pooling = Pooling::kSum;
    } else if (pooling == "mean") {
      input.pooling = Pooling::kMean;
    } else {
      return Bad(where, absl::StrCat("pooling ", Quoted(c.pooling()),
                                     " is neither \"sum\" nor \"mean\""));
    }
    const std::string table = c.table().empty() ? input.name : c.table();
    if (!ValidLayerName(table)) {
      return Bad(where, absl::StrCat("table ", Quoted(table),
                                     " must be 1 to 64 letters, digits, '_', "
                                     "'-' or '.'"));
    }
    auto [it, fresh] =
        table_index_.emplace(table, static_cast<int>(spec_.tables.size()));
    if (fresh) {
      EmbeddingTableSpec spec;
      spec.set_name(table);
      spec.set_dim(c.dim());
      spec_.tables.push_back(std::move(spec));
      table_user_.push_back(where);
    } else if (spec_.tables[it->second].dim() != c.dim()) {
      return Bad(
          where,
          absl::StrCat("table ", Quoted(table), " is read with dim ", c.dim(),
                       " here but dim ", spec_.tables[it->second].dim(), " by ",
                       table_user_[it->second],
                       "; inputs sharing a table share its dim"));
    }
    input.kind = GraphInput::Kind::kCategorical;
    input.field = c.field();
    input.table = it->second;
    input.shape = {c.dim()};
    return absl::OkStatus();
  }

  absl::Status ApplyTableSettings() {
    std::set<std::string> seen;
    for (int t = 0; t < graph_.tables_size(); ++t) {
      const EmbeddingTableSpec& settings = graph_.tables(t);
      const std::string where =
          absl::StrCat("model.graph.tables[", t, "] ", Quoted(settings.name()));
      if (!seen.insert(settings.name()).second) {
        return Bad(where, "configured twice; merge the two entries");
      }
      auto it = table_index_.find(settings.name());
      if (it == table_index_.end()) {
        return Bad(where,
                   "no input reads this table; name it in a categorical "
                   "input's \"table\", or remove the entry");
      }
      EmbeddingTableSpec& table = spec_.tables[it->second];
      if (settings.dim() != 0 && settings.dim() != table.dim()) {
        return Bad(where,
                   absl::StrCat("dim ", settings.dim(), " differs from ",
                                table.dim(), ", the dim ",
                                table_user_[it->second], " reads it with"));
      }
      const int dim = table.dim();
      table = settings;
      table.set_dim(dim);
    }
    return absl::OkStatus();
  }

  // ---- Nodes: names, references, order -------------------------------------

  absl::Status NameNodes() {
    for (int n = 0; n < graph_.nodes_size(); ++n) {
      const GraphConfig::Node& node = graph_.nodes(n);
      RETURN_IF_ERROR(CheckName(NodeWhere(n), node.name()));
      if (absl::StatusOr<NodeKind> kind = KindOf(node.layer()); !kind.ok()) {
        return Bad(NodeWhere(n), std::string(kind.status().message()));
      }
      node_of_name_[node.name()] = n;
    }
    return absl::OkStatus();
  }

  // Each node's inputs as (is_node, index), checked to exist.
  absl::Status ResolveReferences() {
    reads_.resize(graph_.nodes_size());
    for (int n = 0; n < graph_.nodes_size(); ++n) {
      const GraphConfig::Node& node = graph_.nodes(n);
      if (node.inputs().empty()) {
        return Bad(NodeWhere(n),
                   "reads nothing; list its inputs, e.g. \"inputs\": "
                   "[\"features\"]");
      }
      for (const std::string& name : node.inputs()) {
        if (auto it = node_of_name_.find(name); it != node_of_name_.end()) {
          if (it->second == n) {
            return Bad(NodeWhere(n), "reads itself");
          }
          reads_[n].push_back({true, it->second});
        } else if (auto in = value_of_name_.find(name);
                   in != value_of_name_.end()) {
          reads_[n].push_back({false, in->second});
        } else {
          return Bad(NodeWhere(n),
                     absl::StrCat("reads ", Quoted(name),
                                  ", which is neither an input nor a node "
                                  "(names are case-sensitive)"));
        }
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<int> OutputNode() {
    const GraphConfig::Output& output = graph_.output();
    if (output.node().empty()) {
      return absl::InvalidArgumentError(
          "model.graph.output.node is missing; name the node whose outputs "
          "are the logits");
    }
    auto it = node_of_name_.find(output.node());
    if (it == node_of_name_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.graph.output.node ", Quoted(output.node()),
                       value_of_name_.count(output.node()) != 0
                           ? " is an input; the output must be a node"
                           : " is not a node"));
    }
    return it->second;
  }

  // Every node and input the output depends on; the rest is a mistake.
  absl::Status CheckEverythingUsed(int output) {
    std::vector<bool> node_used(graph_.nodes_size(), false);
    std::vector<bool> input_used(graph_.inputs_size(), false);
    std::vector<int> stack = {output};
    node_used[output] = true;
    while (!stack.empty()) {
      const int n = stack.back();
      stack.pop_back();
      for (const auto& [is_node, index] : reads_[n]) {
        if (!is_node) {
          input_used[index] = true;
        } else if (!node_used[index]) {
          node_used[index] = true;
          stack.push_back(index);
        }
      }
    }
    for (int n = 0; n < graph_.nodes_size(); ++n) {
      if (!node_used[n]) {
        return Bad(NodeWhere(n),
                   absl::StrCat("the output (", graph_.output().node(),
                                ") does not depend on it; remove it or feed "
                                "it into a node the output reads"));
      }
    }
    for (int i = 0; i < graph_.inputs_size(); ++i) {
      if (!input_used[i]) {
        return Bad(InputWhere(i),
                   absl::StrCat("the output (", graph_.output().node(),
                                ") does not depend on it; remove it or feed "
                                "it into a node"));
      }
    }
    return absl::OkStatus();
  }

  // The nodes in an order where each follows every node it reads;
  // InvalidArgument naming a cycle when there is none.
  absl::StatusOr<std::vector<int>> Order() {
    const int count = graph_.nodes_size();
    std::vector<int> state(count, 0);  // 0 new, 1 on the path, 2 done
    std::vector<int> order, path;
    std::vector<std::pair<int, size_t>> stack;
    for (int start = 0; start < count; ++start) {
      if (state[start] != 0) continue;
      stack.push_back({start, 0});
      state[start] = 1;
      path.push_back(start);
      while (!stack.empty()) {
        auto& [n, next] = stack.back();
        if (next == reads_[n].size()) {
          state[n] = 2;
          order.push_back(n);
          path.pop_back();
          stack.pop_back();
          continue;
        }
        const auto [is_node, m] = reads_[n][next++];
        if (!is_node || state[m] == 2) continue;
        if (state[m] == 1) {
          std::vector<std::string> cycle;
          auto from = std::find(path.begin(), path.end(), m);
          for (auto it = from; it != path.end(); ++it) {
            cycle.push_back(graph_.nodes(*it).name());
          }
          cycle.push_back(graph_.nodes(m).name());
          return absl::InvalidArgumentError(absl::StrCat(
              "model.graph has a cycle: ", absl::StrJoin(cycle, " reads "),
              "; a node can only read inputs and nodes computed before it"));
        }
        state[m] = 1;
        path.push_back(m);
        stack.push_back({m, 0});
      }
    }
    return order;
  }

  // ---- Shapes, one node at a time --------------------------------------

  absl::Status BuildNode(int n, const std::vector<int>& value_of_node) {
    const GraphConfig::Node& config = graph_.nodes(n);
    GraphNode node;
    node.name = config.name();
    node.layer_class = LayerClassName(config.layer());
    ASSIGN_OR_RETURN(node.kind, KindOf(config.layer()));
    for (const auto& [is_node, index] : reads_[n]) {
      const int value = is_node ? value_of_node[index] : index;
      node.inputs.push_back(value);
      node.input_shapes.push_back(spec_.shape(value));
    }
    absl::Status built = Infer(config.layer(), node);
    if (!built.ok()) {
      return Bad(NodeWhere(n), absl::StrCat(built.message(), " (its inputs: ",
                                            ShapeList(node.input_shapes), ")"));
    }
    if (NumElements(node.output) > kMaxValuesPerExample) {
      return Bad(
          NodeWhere(n),
          absl::StrCat("its output ", ShapeString(node.output), " is too big"));
    }
    spec_.nodes.push_back(std::move(node));
    return absl::OkStatus();
  }

  static absl::Status Arity(const GraphNode& node, size_t low, size_t high,
                            const char* hint) {
    const size_t n = node.inputs.size();
    if (n >= low && n <= high) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat(node.layer_class, " reads ", hint, "; it has ", n,
                     n == 1 ? " input" : " inputs"));
  }

  static absl::Status Infer(const LayerConfig& config, GraphNode& node) {
    const std::vector<Shape>& in = node.input_shapes;
    switch (node.kind) {
      case NodeKind::kLayer: {
        RETURN_IF_ERROR(Arity(node, 1, 1, "one input"));
        ASSIGN_OR_RETURN(std::unique_ptr<Layer> layer,
                         BuildLayer(config, node.name, in[0]));
        node.output = layer->output_shape();
        node.variables = layer->variables();
        node.layer = std::move(layer);
        return absl::OkStatus();
      }
      case NodeKind::kConcatenate:
        return InferConcatenate(config.concatenate(), node);
      case NodeKind::kAdd:
      case NodeKind::kMultiply:
        RETURN_IF_ERROR(Arity(node, 2, SIZE_MAX, "two or more inputs"));
        for (const Shape& s : in) {
          if (s != in[0]) {
            return absl::InvalidArgumentError(absl::StrCat(
                node.layer_class,
                " combines inputs of one shape, value by value; put a Dense "
                "or Reshape before the ones that differ"));
          }
        }
        node.output = in[0];
        return absl::OkStatus();
      case NodeKind::kDotInteraction: {
        RETURN_IF_ERROR(Fields(node));
        node.self_interaction = config.dot_interaction().self_interaction();
        const int64_t f = node.fields;
        node.output = {node.self_interaction ? f * (f + 1) / 2
                                             : f * (f - 1) / 2};
        return absl::OkStatus();
      }
      case NodeKind::kFactorizationMachine:
        RETURN_IF_ERROR(Fields(node));
        node.output = {1};
        return absl::OkStatus();
      case NodeKind::kCross:
        return InferCross(config.cross(), node);
    }
    return absl::InternalError("unknown node kind");
  }

  static absl::Status InferConcatenate(const LayerConfig::Concatenate& c,
                                       GraphNode& node) {
    RETURN_IF_ERROR(Arity(node, 2, SIZE_MAX, "two or more inputs"));
    const std::vector<Shape>& in = node.input_shapes;
    const int rank = static_cast<int>(in[0].size());
    const int axis = c.has_axis() ? c.axis() : -1;
    if (axis < -rank || axis >= rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("axis ", axis, " is outside inputs of rank ", rank));
    }
    node.axis = axis < 0 ? axis + rank : axis;
    Shape out = in[0];
    for (size_t i = 1; i < in.size(); ++i) {
      bool fits = static_cast<int>(in[i].size()) == rank;
      for (int d = 0; fits && d < rank; ++d) {
        fits = d == node.axis || in[i][d] == in[0][d];
      }
      if (!fits) {
        return absl::InvalidArgumentError(absl::StrCat(
            "joins along axis ", axis,
            ", so every other dimension must agree; Flatten or Reshape the "
            "inputs first"));
      }
      out[node.axis] += in[i][node.axis];
    }
    node.output = std::move(out);
    return absl::OkStatus();
  }

  // DotInteraction and FactorizationMachine: F fields of width d, given
  // as F inputs of [d] or one [F, d] input.
  static absl::Status Fields(GraphNode& node) {
    const std::vector<Shape>& in = node.input_shapes;
    if (in.size() == 1) {
      if (in[0].size() != 2 || in[0][0] < 2) {
        return absl::InvalidArgumentError(absl::StrCat(
            node.layer_class,
            " reads one [fields, width] input (two or more fields) or "
            "several [width] inputs; Reshape the input to [fields, width]"));
      }
      node.fields = in[0][0];
      node.width = in[0][1];
    } else {
      for (const Shape& s : in) {
        if (s.size() != 1 || s != in[0]) {
          return absl::InvalidArgumentError(absl::StrCat(
              node.layer_class,
              " needs inputs of one width [d] (e.g. embeddings of one dim "
              "and a Dense layer of d units); Reshape or Dense the ones "
              "that differ"));
        }
      }
      node.fields = static_cast<int64_t>(in.size());
      node.width = in[0][0];
    }
    if (node.fields > kMaxInteractionFields) {
      return absl::InvalidArgumentError(
          absl::StrCat(node.fields, " fields are too many (at most ",
                       kMaxInteractionFields, ")"));
    }
    return absl::OkStatus();
  }

  static absl::Status InferCross(const LayerConfig::Cross& c, GraphNode& node) {
    RETURN_IF_ERROR(Arity(node, 1, 2, "x0 and x, or one input (x0 = x)"));
    const std::vector<Shape>& in = node.input_shapes;
    if (in[0].size() != 1 || in.back() != in[0]) {
      return absl::InvalidArgumentError(
          "Cross needs [d] inputs of one width; Flatten or Dense them first");
    }
    const int64_t d = in[0][0];
    node.projection_dim = c.projection_dim();
    node.use_bias = !c.has_use_bias() || c.use_bias();
    if (node.projection_dim < 0 || node.projection_dim >= d) {
      return absl::InvalidArgumentError(
          absl::StrCat("projection_dim ", node.projection_dim,
                       " must be 0 (full rank) or 1 to ", d - 1,
                       " (low rank, below the width ", d, ")"));
    }
    const int64_t kernel_values =
        node.projection_dim == 0 ? d * d : 2 * d * node.projection_dim;
    if (kernel_values > kMaxVariableElements) {
      return absl::InvalidArgumentError(
          absl::StrCat("its kernel would hold ", kernel_values,
                       " values (at most ", kMaxVariableElements,
                       "); narrow the input or set a small "
                       "projection_dim"));
    }
    if (node.projection_dim == 0) {
      node.variables.push_back(
          Variable(node.name, "kernel", {d, d}, Initializer::kGlorotUniform));
    } else {
      node.variables.push_back(Variable(node.name, "kernel_u",
                                        {d, node.projection_dim},
                                        Initializer::kGlorotUniform));
      node.variables.push_back(Variable(node.name, "kernel_v",
                                        {node.projection_dim, d},
                                        Initializer::kGlorotUniform));
    }
    if (node.use_bias) {
      node.variables.push_back(
          Variable(node.name, "bias", {d}, Initializer::kZeros));
    }
    node.output = {d};
    return absl::OkStatus();
  }

  absl::Status CheckLoss(int output) {
    const Shape& shape = spec_.shape(spec_.output);
    const std::string where =
        absl::StrCat("model.graph.output ", Quoted(graph_.nodes(output).name()),
                     " (", ShapeString(shape), ")");
    spec_.loss = graph_.output().loss();
    switch (spec_.loss) {
      case GraphConfig::Output::SOFTMAX_CROSS_ENTROPY:
        if (shape != Shape{data_.num_classes}) {
          return Bad(where,
                     absl::StrCat("SOFTMAX_CROSS_ENTROPY needs the ",
                                  data_.num_classes,
                                  " class logits; end with a Dense layer of ",
                                  data_.num_classes, " units"));
        }
        return absl::OkStatus();
      case GraphConfig::Output::SIGMOID_CROSS_ENTROPY:
        if (data_.num_classes != 2) {
          return Bad(where,
                     absl::StrCat("SIGMOID_CROSS_ENTROPY needs binary "
                                  "labels; the data has ",
                                  data_.num_classes,
                                  " classes: use SOFTMAX_CROSS_ENTROPY"));
        }
        if (shape != Shape{1}) {
          return Bad(where,
                     "SIGMOID_CROSS_ENTROPY needs one logit per example; end "
                     "with a Dense layer of 1 unit");
        }
        return absl::OkStatus();
      default:
        return Bad(where,
                   "loss is missing; \"SOFTMAX_CROSS_ENTROPY\" (classes) or "
                   "\"SIGMOID_CROSS_ENTROPY\" (click-through rate)");
    }
  }

  static inline const InputSpec kNoData{};
  const GraphConfig& graph_;
  const InputSpec& data_;
  const bool have_data_;
  GraphSpec spec_;
  std::map<std::string, std::string> names_;  // name -> where it is defined
  std::map<std::string, int> value_of_name_;  // inputs
  std::map<std::string, int> node_of_name_;   // config indices
  std::map<std::string, int> table_index_;
  std::vector<std::string> table_user_;  // the first input reading each
  std::vector<std::vector<std::pair<bool, int>>> reads_;
};

}  // namespace

const Shape& GraphSpec::shape(int value) const {
  return value < static_cast<int>(inputs.size())
             ? inputs[value].shape
             : nodes[value - inputs.size()].output;
}

const std::string& GraphSpec::name(int value) const {
  return value < static_cast<int>(inputs.size())
             ? inputs[value].name
             : nodes[value - inputs.size()].name;
}

std::vector<ModelVariable> GraphSpec::Variables() const {
  std::vector<ModelVariable> all;
  for (const GraphNode& node : nodes) {
    all.insert(all.end(), node.variables.begin(), node.variables.end());
  }
  return all;
}

std::string GraphSpec::Describe() const {
  std::vector<std::string> lines;
  for (const GraphInput& input : inputs) {
    lines.push_back(absl::StrCat(
        input.name, " (",
        input.kind == GraphInput::Kind::kFeatures
            ? "features"
            : absl::StrCat("field ", input.field, " in table ",
                           tables[input.table].name(),
                           input.pooling == Pooling::kSum ? ", sum" : ", mean"),
        ") -> ", ShapeString(input.shape)));
  }
  for (const GraphNode& node : nodes) {
    std::vector<std::string> reads;
    for (int v : node.inputs) reads.push_back(name(v));
    lines.push_back(absl::StrCat(node.name, " (", node.layer_class, ") <- ",
                                 absl::StrJoin(reads, ", "), " -> ",
                                 ShapeString(node.output)));
  }
  return absl::StrJoin(lines, "\n");
}

absl::Status ValidateGraphConfig(const GraphConfig& graph) {
  return GraphBuilder(graph, nullptr).Build().status();
}

absl::StatusOr<GraphSpec> BuildGraphSpec(const GraphConfig& graph,
                                         const InputSpec& data) {
  return GraphBuilder(graph, &data).Build();
}

}  // namespace psflow
