// `mlp` and `softmax_regression` as a graph:
//
//   pixels [in] (the image flattened, pixels scaled by the reader)
//     -> Dense h_0 act "dense_0" -> ... -> Dense classes "dense_<L>"
//     -> softmax cross-entropy
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/graph/legacy_graphs.h"
#include "model/layers/layer.h"

namespace psflow {
namespace {

const char* ActivationOf(const ModelConfig& config) {
  if (!config.has_mlp()) return "";
  switch (config.mlp().activation()) {
    case ModelConfig::Mlp::TANH:
      return "tanh";
    case ModelConfig::Mlp::SIGMOID:
      return "sigmoid";
    default:  // RELU, and unset
      return "relu";
  }
}

}  // namespace

absl::Status ValidateMlpConfig(const ModelConfig& config) {
  const ModelConfig::Mlp& mlp = config.mlp();
  for (int i = 0; i < mlp.hidden_sizes_size(); ++i) {
    if (mlp.hidden_sizes(i) <= 0 || mlp.hidden_sizes(i) > kMaxLayerWidth) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.mlp.hidden_sizes[", i, "] is ", mlp.hidden_sizes(i),
          "; a layer's width must be 1 to ", kMaxLayerWidth));
    }
  }
  if (!ModelConfig::Mlp::Activation_IsValid(mlp.activation())) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.mlp.activation ", mlp.activation(),
                     " is unknown; use RELU, TANH or SIGMOID"));
  }
  return absl::OkStatus();
}

absl::StatusOr<LegacyGraph> MlpGraph(const ModelConfig& config,
                                     const InputSpec& input) {
  if (absl::Status valid = ValidateMlpConfig(config); !valid.ok()) {
    return valid;
  }
  bool positive = !input.example_shape.empty();
  for (int64_t d : input.example_shape) positive = positive && d > 0;
  if (!positive) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model input shape is [", absl::StrJoin(input.example_shape, ", "),
        "]; every dimension must be positive"));
  }
  if (input.num_classes < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("model has ", input.num_classes,
                     " classes; a classifier needs 2 or more"));
  }
  std::vector<int64_t> widths = {input.num_features()};
  if (config.has_mlp()) {
    widths.insert(widths.end(), config.mlp().hidden_sizes().begin(),
                  config.mlp().hidden_sizes().end());
  }
  widths.push_back(input.num_classes);
  const bool hidden = widths.size() > 2;

  LegacyGraph out;
  out.input = input;
  GraphConfig& g = out.graph;
  GraphConfig::Input* features = g.add_inputs();
  features->set_name("pixels");  // the ONNX export's input
  features->mutable_features();
  std::string previous = "pixels";
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    GraphConfig::Node* node = g.add_nodes();
    node->set_name(absl::StrCat("dense_", l));
    node->add_inputs(previous);
    LayerConfig::Dense* dense = node->mutable_layer()->mutable_dense();
    dense->set_units(widths[l + 1]);
    if (l + 2 < widths.size()) dense->set_activation(ActivationOf(config));
    previous = node->name();
  }
  g.mutable_output()->set_node(previous);
  g.mutable_output()->set_loss(GraphConfig::Output::SOFTMAX_CROSS_ENTROPY);

  out.options.features_shape = {input.num_features()};
  out.options.feature_scale = 1.0f / 255;  // the MLP expects [0, 1]
  out.options.description = absl::StrCat(
      hidden ? "mlp " : "softmax regression ", absl::StrJoin(widths, "-"),
      hidden ? absl::StrCat(" ", ActivationOf(config)) : "");
  return out;
}

}  // namespace psflow
