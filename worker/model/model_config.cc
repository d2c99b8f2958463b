#include "worker/model/model_config.h"

namespace psflow {

MlpSpec MlpSpecFromConfig(const ModelConfig& config, int64_t input_size,
                          int64_t num_classes) {
  MlpSpec spec;
  spec.input_size = input_size;
  spec.num_classes = num_classes;
  if (config.has_mlp()) {
    spec.hidden_sizes.assign(config.mlp().hidden_sizes().begin(),
                             config.mlp().hidden_sizes().end());
    switch (config.mlp().activation()) {
      case ModelConfig::Mlp::TANH:
        spec.activation = Activation::kTanh;
        break;
      case ModelConfig::Mlp::SIGMOID:
        spec.activation = Activation::kSigmoid;
        break;
      default:
        spec.activation = Activation::kRelu;
    }
  }
  return spec;
}

}  // namespace psflow
