#include "model/registry.h"

#include "absl/strings/str_cat.h"
#include "model/graph/graph_model.h"
#include "model/graph/graph_spec.h"
#include "model/graph/legacy_graphs.h"
#include "model/layers/layer_factory.h"

namespace psflow {
namespace {

// One model kind: how to check its config and what graph it runs as.
struct ModelKind {
  ModelConfig::KindCase kind;
  absl::Status (*validate)(const ModelConfig& config);
  absl::StatusOr<LegacyGraph> (*graph)(const ModelConfig& config,
                                       const InputSpec& input);
};

absl::Status ValidateNothing(const ModelConfig&) { return absl::OkStatus(); }

absl::Status ValidateGraph(const ModelConfig& config) {
  return ValidateGraphConfig(config.graph());
}

absl::StatusOr<LegacyGraph> GraphOf(const ModelConfig& config,
                                    const InputSpec& input) {
  return LegacyGraph{config.graph(), GraphOptions(), input};
}

// Every kind runs as a graph: the older ones translated (legacy_graphs.h).
constexpr ModelKind kKinds[] = {
    {ModelConfig::kMlp, ValidateMlpConfig, MlpGraph},
    {ModelConfig::kSoftmaxRegression, ValidateNothing, MlpGraph},
    {ModelConfig::kWideDeep, ValidateWideDeepConfig, WideDeepGraph},
    {ModelConfig::kGraph, ValidateGraph, GraphOf},
};

absl::Status ValidateLayers(const ModelConfig& config) {
  return ValidateLayerConfigs(config.layers());
}

// `layers` is a repeated field, so it sits outside the oneof.
constexpr ModelKind kLayersKind = {ModelConfig::KIND_NOT_SET, ValidateLayers,
                                   LayersGraph};

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

absl::StatusOr<LegacyGraph> ModelGraph(const ModelConfig& config,
                                       const InputSpec& input) {
  absl::StatusOr<const ModelKind*> kind = KindOf(config);
  if (!kind.ok()) return kind.status();
  absl::Status valid = (*kind)->validate(config);
  if (!valid.ok()) return valid;
  return (*kind)->graph(config, input);
}

absl::StatusOr<std::unique_ptr<ModelDefinition>> DefineModel(
    const ModelConfig& config, const InputSpec& input) {
  absl::StatusOr<LegacyGraph> graph = ModelGraph(config, input);
  if (!graph.ok()) return graph.status();
  absl::StatusOr<std::unique_ptr<GraphDefinition>> definition =
      GraphDefinition::Create(graph->graph, graph->input, graph->options);
  if (!definition.ok()) return definition.status();
  return std::unique_ptr<ModelDefinition>(*std::move(definition));
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
