// Test helpers: MLPs (the `mlp` and `softmax_regression` kinds, which run
// as graphs: model/graph/legacy_graphs.h) described the short way the
// tests write them, defined through the registry as a job's are.
#ifndef PSFLOW_MODEL_MLP_TEST_UTIL_H_
#define PSFLOW_MODEL_MLP_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status_matchers.h"
#include "gtest/gtest.h"
#include "model/registry.h"

namespace psflow {

// Input width, hidden widths, classes, activation.
struct TestSpec {
  int64_t input = 0;
  std::vector<int64_t> hidden;
  int64_t classes = 0;
  Activation activation = Activation::kRelu;
};

inline ModelConfig MlpConfig(const TestSpec& t) {
  ModelConfig config;
  if (t.hidden.empty()) {
    config.mutable_softmax_regression();
    return config;
  }
  ModelConfig::Mlp* mlp = config.mutable_mlp();
  for (int64_t h : t.hidden) mlp->add_hidden_sizes(h);
  mlp->set_activation(t.activation == Activation::kTanh ? ModelConfig::Mlp::TANH
                      : t.activation == Activation::kSigmoid
                          ? ModelConfig::Mlp::SIGMOID
                          : ModelConfig::Mlp::RELU);
  return config;
}

inline absl::StatusOr<std::unique_ptr<ModelDefinition>> TryDefine(
    const TestSpec& t) {
  return DefineModel(MlpConfig(t), InputSpec{{t.input}, t.classes});
}

// Fails the test (and returns null) when `t` is not a valid MLP.
inline std::unique_ptr<ModelDefinition> Define(const TestSpec& t) {
  auto definition = TryDefine(t);
  EXPECT_OK(definition.status());
  return definition.ok() ? *std::move(definition) : nullptr;
}

}  // namespace psflow

#endif  // PSFLOW_MODEL_MLP_TEST_UTIL_H_
