#include "model/registry.h"

#include "absl/strings/str_cat.h"
#include "model/graph/graph_model.h"
#include "model/graph/graph_spec.h"
#include "model/layers/layer_factory.h"
#include "model/mlp.h"
#include "model/sequential.h"
#include "model/wide_deep.h"

namespace psflow {
namespace {

// One model kind: how to check its config and how to define it.
struct ModelKind {
  ModelConfig::KindCase kind;
  absl::Status (*validate)(const ModelConfig& config);
  absl::StatusOr<std::unique_ptr<ModelDefinition>> (*define)(
      const ModelConfig& config, const InputSpec& input);
};

MlpSpec MlpSpecOf(const ModelConfig& config) {
  MlpSpec spec;
  if (!config.has_mlp()) return spec;  // softmax regression
  spec.hidden_sizes.assign(config.mlp().hidden_sizes().begin(),
                           config.mlp().hidden_sizes().end());
  switch (config.mlp().activation()) {
    case ModelConfig::Mlp::TANH:
      spec.activation = Activation::kTanh;
      break;
    case ModelConfig::Mlp::SIGMOID:
      spec.activation = Activation::kSigmoid;
      break;
    default:  // RELU, and unset
      spec.activation = Activation::kRelu;
  }
  return spec;
}

absl::Status ValidateMlp(const ModelConfig& config) {
  const ModelConfig::Mlp& mlp = config.mlp();
  for (int i = 0; i < mlp.hidden_sizes_size(); ++i) {
    if (mlp.hidden_sizes(i) <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.mlp.hidden_sizes[", i, "] is ",
                       mlp.hidden_sizes(i), "; layer widths must be positive"));
    }
  }
  if (!ModelConfig::Mlp::Activation_IsValid(mlp.activation())) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.mlp.activation ", mlp.activation(),
                     " is unknown; use RELU, TANH or SIGMOID"));
  }
  return absl::OkStatus();
}

absl::Status ValidateNothing(const ModelConfig&) { return absl::OkStatus(); }

absl::StatusOr<std::unique_ptr<ModelDefinition>> DefineMlp(
    const ModelConfig& config, const InputSpec& input) {
  absl::StatusOr<std::unique_ptr<MlpDefinition>> definition =
      MlpDefinition::Create(MlpSpecOf(config), input);
  if (!definition.ok()) return definition.status();
  return std::unique_ptr<ModelDefinition>(*std::move(definition));
}

absl::StatusOr<WideDeepSpec> WideDeepSpecOf(const ModelConfig& config,
                                            const InputSpec& input) {
  const ModelConfig::WideDeep& w = config.wide_deep();
  WideDeepSpec spec;
  spec.num_fields = input.num_fields;
  spec.num_dense =
      input.example_shape.empty() ? 0 : static_cast<int>(input.num_features());
  if (w.embedding_dim() != 0) spec.embedding_dim = w.embedding_dim();
  if (w.hidden_sizes_size() > 0) {
    spec.hidden_sizes.assign(w.hidden_sizes().begin(), w.hidden_sizes().end());
  }
  if (w.pooling().empty() || w.pooling() == "sum") {
    spec.pooling = WideDeepSpec::Pooling::kSum;
  } else if (w.pooling() == "mean") {
    spec.pooling = WideDeepSpec::Pooling::kMean;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("model.wide_deep.pooling is \"", w.pooling(),
                     "\"; use \"sum\" or \"mean\""));
  }
  spec.embedding = w.embedding();
  spec.linear = w.linear();
  return spec;
}

absl::Status ValidateWideDeep(const ModelConfig& config) {
  InputSpec any;  // sizes come from the data; check the rest
  any.num_fields = 1;
  absl::StatusOr<WideDeepSpec> spec = WideDeepSpecOf(config, any);
  if (!spec.ok()) return spec.status();
  return WideDeepDefinition::Create(*spec).status();
}

absl::StatusOr<std::unique_ptr<ModelDefinition>> DefineWideDeep(
    const ModelConfig& config, const InputSpec& input) {
  absl::StatusOr<WideDeepSpec> spec = WideDeepSpecOf(config, input);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<std::unique_ptr<WideDeepDefinition>> definition =
      WideDeepDefinition::Create(*spec);
  if (!definition.ok()) return definition.status();
  return std::unique_ptr<ModelDefinition>(*std::move(definition));
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

constexpr ModelKind kKinds[] = {
    {ModelConfig::kMlp, ValidateMlp, DefineMlp},
    {ModelConfig::kSoftmaxRegression, ValidateNothing, DefineMlp},
    {ModelConfig::kWideDeep, ValidateWideDeep, DefineWideDeep},
    {ModelConfig::kGraph, ValidateGraph, DefineGraph},
};

absl::Status ValidateLayers(const ModelConfig& config) {
  return ValidateLayerConfigs(config.layers());
}

absl::StatusOr<std::unique_ptr<ModelDefinition>> DefineLayers(
    const ModelConfig& config, const InputSpec& input) {
  absl::StatusOr<std::unique_ptr<SequentialDefinition>> definition =
      SequentialDefinition::Create(config.layers(), input);
  if (!definition.ok()) return definition.status();
  return std::unique_ptr<ModelDefinition>(*std::move(definition));
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
