#include "model/registry.h"

#include "absl/strings/str_cat.h"
#include "model/graph/graph_model.h"
#include "model/graph/graph_spec.h"
#include "model/graph/legacy_graphs.h"
#include "model/layers/layer_factory.h"

namespace psflow {
namespace {

// One model kind: how to check its config and how to define it.
struct ModelKind {
  ModelConfig::KindCase kind;
  absl::Status (*validate)(const ModelConfig& config);
  absl::StatusOr<std::unique_ptr<ModelDefinition>> (*define)(
      const ModelConfig& config, const InputSpec& input);
};

absl::Status ValidateNothing(const ModelConfig&) { return absl::OkStatus(); }

absl::StatusOr<std::unique_ptr<ModelDefinition>> DefineGraphOf(
    absl::StatusOr<LegacyGraph> graph) {
  if (!graph.ok()) return graph.status();
  absl::StatusOr<std::unique_ptr<GraphDefinition>> definition =
      GraphDefinition::Create(graph->graph, graph->input, graph->options);
  if (!definition.ok()) return definition.status();
  return std::unique_ptr<ModelDefinition>(*std::move(definition));
}

absl::StatusOr<std::unique_ptr<ModelDefinition>> DefineMlp(
    const ModelConfig& config, const InputSpec& input) {
  return DefineGraphOf(MlpGraph(config, input));
}

absl::StatusOr<std::unique_ptr<ModelDefinition>> DefineWideDeep(
    const ModelConfig& config, const InputSpec& input) {
  return DefineGraphOf(WideDeepGraph(config, input));
}

absl::Status ValidateGraph(const ModelConfig& config) {
  return ValidateGraphConfig(config.graph());
}

absl::StatusOr<std::unique_ptr<ModelDefinition>> DefineGraph(
    const ModelConfig& config, const InputSpec& input) {
  absl::StatusOr<std::unique_ptr<GraphDefinition>> definition =
      GraphDefinition::Create(config.graph(), input);
  if (!definition.ok()) return definition.status();
  return std::unique_ptr<ModelDefinition>(*std::move(definition));
}

// Every kind runs as a graph: the older ones translated (legacy_graphs.h).
constexpr ModelKind kKinds[] = {
    {ModelConfig::kMlp, ValidateMlpConfig, DefineMlp},
    {ModelConfig::kSoftmaxRegression, ValidateNothing, DefineMlp},
    {ModelConfig::kWideDeep, ValidateWideDeepConfig, DefineWideDeep},
    {ModelConfig::kGraph, ValidateGraph, DefineGraph},
};

absl::Status ValidateLayers(const ModelConfig& config) {
  return ValidateLayerConfigs(config.layers());
}

absl::StatusOr<std::unique_ptr<ModelDefinition>> DefineLayers(
    const ModelConfig& config, const InputSpec& input) {
  return DefineGraphOf(LayersGraph(config, input));
}

// `layers` is a repeated field, so it sits outside the oneof.
constexpr ModelKind kLayersKind = {ModelConfig::KIND_NOT_SET, ValidateLayers,
                                   DefineLayers};

absl::StatusOr<const ModelKind*> KindOf(const ModelConfig& config) {
  if (!config.layers().empty()) {
    if (config.kind_case() != ModelConfig::KIND_NOT_SET) {
      return absl::InvalidArgumentError(
          "model sets both \"layers\" and another kind (\"mlp\" or "
          "\"softmax_regression\"); keep one");
    }
    return &kLayersKind;
  }
  if (config.kind_case() == ModelConfig::KIND_NOT_SET) {
    return absl::InvalidArgumentError(
        "model is missing; set \"layers\": [...], \"mlp\": "
        "{\"hidden_sizes\": [256]}, \"softmax_regression\": {}, "
        "\"wide_deep\": {} or \"graph\": {...} (docs/models.md)");
  }
  for (const ModelKind& kind : kKinds) {
    if (kind.kind == config.kind_case()) return &kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("model kind ", static_cast<int>(config.kind_case()),
                   " is not known to this build of psflow; update every "
                   "task to the same version"));
}

}  // namespace

absl::Status ValidateModelConfig(const ModelConfig& config) {
  absl::StatusOr<const ModelKind*> kind = KindOf(config);
  if (!kind.ok()) return kind.status();
  return (*kind)->validate(config);
}

absl::StatusOr<std::unique_ptr<ModelDefinition>> DefineModel(
    const ModelConfig& config, const InputSpec& input) {
  absl::StatusOr<const ModelKind*> kind = KindOf(config);
  if (!kind.ok()) return kind.status();
  absl::Status valid = (*kind)->validate(config);
  if (!valid.ok()) return valid;
  return (*kind)->define(config, input);
}

absl::StatusOr<std::unique_ptr<ModelDefinition>> DefineJobModel(
    const JobSpec& spec) {
  InputSpec input;
  input.example_shape.assign(spec.example_shape().begin(),
                             spec.example_shape().end());
  input.num_classes = spec.num_classes();
  input.num_fields = spec.num_fields();
  return DefineModel(spec.config().model(), input);
}

}  // namespace psflow
