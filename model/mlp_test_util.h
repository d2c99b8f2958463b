// Test helpers: MLPs described the short way the tests write them.
#ifndef PSFLOW_MODEL_MLP_TEST_UTIL_H_
#define PSFLOW_MODEL_MLP_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status_matchers.h"
#include "gtest/gtest.h"
#include "model/mlp.h"

namespace psflow {

// Input width, hidden widths, classes, activation.
struct TestSpec {
  int64_t input = 0;
  std::vector<int64_t> hidden;
  int64_t classes = 0;
  Activation activation = Activation::kRelu;
};

inline absl::StatusOr<std::unique_ptr<MlpDefinition>> TryDefine(
    const TestSpec& t) {
  return MlpDefinition::Create(MlpSpec{t.hidden, t.activation},
                               InputSpec{{t.input}, t.classes});
}

// Fails the test (and returns null) when `t` is not a valid MLP.
inline std::unique_ptr<MlpDefinition> Define(const TestSpec& t) {
  auto definition = TryDefine(t);
  EXPECT_OK(definition.status());
  return definition.ok() ? *std::move(definition) : nullptr;
}

}  // namespace psflow

#endif  // PSFLOW_MODEL_MLP_TEST_UTIL_H_
