#include "model/onnx/onnx_export.h"

#include <climits>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/graph/graph_spec.h"
#include "model/onnx/onnx_inputs.h"
#include "model/onnx/onnx_nodes.h"
#include "model/registry.h"

namespace psflow {
namespace {

constexpr int64_t kIrVersion = 8;  // ONNX 1.12's newest
constexpr int64_t kOpset = 13;
constexpr int64_t kMlOpset = 2;  // LabelEncoder with int64 keys and values
constexpr char kLogits[] = "logits";
constexpr char kProbabilities[] = "probabilities";

absl::Status NeedImages(const OnnxExportSpec& spec, const char* kind) {
  if (spec.data_format == DataConfig::CRITEO) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.", kind,
        " reads images, but the checkpoint's data are CRITEO rows; the "
        "model config does not belong to this checkpoint"));
  }
  return absl::OkStatus();
}

const LayerConfig* NodeConfig(const GraphConfig& graph,
                              const std::string& name) {
  for (const GraphConfig::Node& node : graph.nodes()) {
    if (node.name() == name) return &node.layer();
  }
  return nullptr;
}

// The graph the model runs as (every kind: model/registry.h ModelGraph):
// the inputs (with the reader's preprocessing), then the nodes in the
// spec's order, the variables under the kind's names.
absl::StatusOr<std::string> EmitGraph(OnnxBuilder& b,
                                      const OnnxExportSpec& spec,
                                      const ModelDefinition& definition) {
  ASSIGN_OR_RETURN(LegacyGraph model, ModelGraph(spec.config, spec.input));
  InputSpec graph_input = model.input;
  if (!model.options.features_shape.empty()) {
    graph_input.example_shape = model.options.features_shape;
  }
  ASSIGN_OR_RETURN(GraphSpec graph, BuildGraphSpec(model.graph, graph_input));
  b.RenameVariables(model.options.variable_names);
  std::vector<std::string> values(graph.num_values());
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    const GraphInput& input = graph.inputs[i];
    if (input.name == kOnnxIdsInput || input.name == kLogits ||
        input.name == kProbabilities) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.graph input \"", input.name,
          "\" has the name of one of the exported model's own inputs and "
          "outputs (ids, logits, probabilities); rename it in the job config "
          "and pass that config with --job"));
    }
    if (input.kind != GraphInput::Kind::kFeatures) continue;
    values[i] = spec.data_format == DataConfig::CRITEO
                    ? EmitCtrDenseInput(b, input.name, input.shape[0])
                    : EmitImageInput(b, input.name, spec.input.example_shape,
                                     definition.feature_scale(), input.shape);
  }
  ASSIGN_OR_RETURN(auto categorical,
                   EmitCategoricalInputs(b, graph, spec.input.num_fields));
  for (const auto& [index, name] : categorical) values[index] = name;
  for (size_t k = 0; k < graph.nodes.size(); ++k) {
    const GraphNode& node = graph.nodes[k];
    const LayerConfig* layer = NodeConfig(model.graph, node.name);
    if (layer == nullptr) {
      return absl::InternalError(
          absl::StrCat("graph node ", node.name, " has no config"));
    }
    std::vector<std::string> inputs;
    for (int v : node.inputs) inputs.push_back(values[v]);
    ASSIGN_OR_RETURN(values[graph.inputs.size() + k],
                     EmitGraphNode(b, node, *layer, inputs));
  }
  return values[graph.output];
}

absl::StatusOr<std::string> EmitBody(OnnxBuilder& b, const OnnxExportSpec& spec,
                                     const ModelDefinition& definition) {
  if (!spec.config.layers().empty()) {
    RETURN_IF_ERROR(NeedImages(spec, "layers"));
    return EmitGraph(b, spec, definition);
  }
  switch (spec.config.kind_case()) {
    case ModelConfig::kMlp:
    case ModelConfig::kSoftmaxRegression:
      RETURN_IF_ERROR(NeedImages(spec, "mlp"));
      return EmitGraph(b, spec, definition);
    case ModelConfig::kGraph:
      return EmitGraph(b, spec, definition);
    case ModelConfig::kWideDeep:
      if (spec.data_format != DataConfig::CRITEO) {
        return absl::InvalidArgumentError(
            "model.wide_deep reads CRITEO rows, but the checkpoint's data "
            "are images; the model config does not belong to this "
            "checkpoint");
      }
      return EmitGraph(b, spec, definition);
    default:
      break;
  }
  return absl::UnimplementedError(absl::StrCat(
      "psctl ckpt export --format=onnx: model kind ",
      static_cast<int>(spec.config.kind_case()), " is not exportable yet"));
}

}  // namespace

absl::StatusOr<onnx::ModelProto> BuildOnnxModel(const OnnxExportSpec& spec,
                                                const OnnxWeights& weights) {
  ASSIGN_OR_RETURN(std::unique_ptr<ModelDefinition> definition,
                   DefineModel(spec.config, spec.input));
  onnx::ModelProto model;
  model.set_ir_version(kIrVersion);
  model.set_producer_name("psflow");
  model.set_doc_string(
      "Exported by psctl ckpt export --format=onnx; inputs, outputs and "
      "preprocessing: psflow's docs/models.md, \"ONNX export\".");
  onnx::OperatorSetIdProto& opset = *model.add_opset_import();
  opset.set_domain("");
  opset.set_version(kOpset);
  for (const auto& [key, value] : spec.metadata) {
    onnx::StringStringEntryProto& entry = *model.add_metadata_props();
    entry.set_key(key);
    entry.set_value(value);
  }
  onnx::GraphProto& graph = *model.mutable_graph();
  graph.set_name(spec.name.empty() ? "psflow" : spec.name);
  OnnxBuilder b(&graph, weights);
  // The outputs' names first, so that no node takes them.
  b.Unique(kLogits);
  b.Unique(kProbabilities);
  ASSIGN_OR_RETURN(std::string out, EmitBody(b, spec, *definition));

  const int64_t classes = definition->binary() ? 1 : spec.input.num_classes;
  onnx::NodeProto& logits = *graph.add_node();
  logits.set_op_type("Identity");
  logits.set_name(kLogits);
  logits.add_input(out);
  logits.add_output(kLogits);
  onnx::NodeProto& probabilities = *graph.add_node();
  probabilities.set_name(kProbabilities);
  probabilities.add_input(kLogits);
  probabilities.add_output(kProbabilities);
  if (definition->binary()) {
    probabilities.set_op_type("Sigmoid");
  } else {
    probabilities.set_op_type("Softmax");
    onnx::AttributeProto& axis = *probabilities.add_attribute();
    axis.set_name("axis");
    axis.set_type(onnx::AttributeProto::INT);
    axis.set_i(1);
  }
  b.Output(kLogits, onnx::TensorProto::FLOAT, {-1, classes}, {"batch"});
  b.Output(kProbabilities, onnx::TensorProto::FLOAT, {-1, classes}, {"batch"});
  for (const onnx::NodeProto& node : graph.node()) {
    if (node.domain() == "ai.onnx.ml") {
      onnx::OperatorSetIdProto& ml = *model.add_opset_import();
      ml.set_domain("ai.onnx.ml");
      ml.set_version(kMlOpset);
      break;
    }
  }
  if (model.ByteSizeLong() > static_cast<size_t>(INT_MAX)) {
    return absl::OutOfRangeError(absl::StrCat(
        "the ONNX model would take ", model.ByteSizeLong() >> 20,
        " MiB, over protobuf's 2 GiB; export with --format=safetensors "
        "instead"));
  }
  return model;
}

}  // namespace psflow
