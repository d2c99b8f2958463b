#include <cmath>
#include <random>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/device/cpu/cpu_device.h"
#include "model/initializer.h"
#include "model/mlp_test_util.h"
#include "model/registry.h"

namespace psflow {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<absl::Span<const float>> Const(
    const std::vector<std::vector<float>>& v) {
  std::vector<absl::Span<const float>> spans;
  for (const auto& x : v) spans.push_back(x);
  return spans;
}

std::vector<absl::Span<float>> Mutable(std::vector<std::vector<float>>& v) {
  std::vector<absl::Span<float>> spans;
  for (auto& x : v) spans.push_back(absl::MakeSpan(x));
  return spans;
}

TEST(MlpTest, VariablesAreNamedAndShapedLayerByLayer) {
  TestSpec spec{784, {256, 64}, 10, Activation::kRelu};
  std::vector<LogicalVariable> vars =
      LogicalVariables(Define(spec)->variables());
  ASSERT_EQ(vars.size(), 6u);
  EXPECT_EQ(vars[0].name, "dense_0/kernel");
  EXPECT_THAT(vars[0].shape, ElementsAre(784, 256));
  EXPECT_EQ(vars[3].name, "dense_1/bias");
  EXPECT_THAT(vars[3].shape, ElementsAre(64));
  EXPECT_THAT(vars[4].shape, ElementsAre(64, 10));
}

TEST(MlpTest, InitialValuesAreGlorotUniformAndSeeded) {
  TestSpec spec{100, {50}, 10, Activation::kRelu};
  const auto definition = Define(spec);
  const auto& variables = definition->variables();
  auto a = InitialValues(variables, 1), b = InitialValues(variables, 1),
       c = InitialValues(variables, 2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  const float limit = std::sqrt(6.0f / 150);
  double sum = 0;
  for (float x : a[0]) {
    EXPECT_LE(std::fabs(x), limit);
    sum += x;
  }
  EXPECT_NEAR(sum / a[0].size(), 0.0, 0.05 * limit);
  for (float x : a[1]) EXPECT_EQ(x, 0.0f);  // biases start at zero
}

TEST(MlpTest, DescribesItsLayers) {
  EXPECT_EQ(Define({784, {256}, 10, Activation::kRelu})->Describe(),
            "mlp 784-256-10 relu");
  EXPECT_EQ(Define({784, {}, 10})->Describe(), "softmax regression 784-10");
}

TEST(MlpTest, ExpectsPixelsScaledByTheReaderAndReadsThemFlattened) {
  const auto definition = Define({784, {256}, 10, Activation::kRelu});
  EXPECT_EQ(definition->feature_scale(), 1.0f / 255);
  EXPECT_FALSE(definition->binary());
  EXPECT_TRUE(definition->tables().empty());
  // Images keep their shape as the model's input; the graph reads them as
  // one vector.
  ASSERT_OK_AND_ASSIGN(auto images, DefineModel(MlpConfig({0, {256}, 10}),
                                                InputSpec{{28, 28}, 10}));
  EXPECT_EQ(images->Describe(), "mlp 784-256-10 relu");
  EXPECT_EQ(images->input().example_shape, (std::vector<int64_t>{28, 28}));
  EXPECT_EQ(images->variables()[0].shape(), (std::vector<int64_t>{784, 256}));
}

TEST(MlpTest, BadSpecsNameTheField) {
  EXPECT_THAT(TryDefine({784, {128, 0}, 10, Activation::kRelu}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("hidden_sizes[1] is 0")));
  EXPECT_THAT(
      TryDefine({784, {}, 1, Activation::kRelu}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1 classes")));
}

// The analytic gradients of every parameter against central finite
// differences of the mean loss, for each activation.
TEST(MlpTest, GradientsMatchFiniteDifferences) {
  for (Activation act :
       {Activation::kTanh, Activation::kSigmoid, Activation::kRelu}) {
    SCOPED_TRACE(static_cast<int>(act));
    TestSpec spec{5, {4, 3}, 3, act};
    auto device = CreateCpuDevice(1);
    ASSERT_OK_AND_ASSIGN(auto mlp, Define(spec)->Instantiate(device.get(), 4));
    auto params = InitialValues(Define(spec)->variables(), 7);
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> dist(-1, 1);
    for (auto& p : params) {
      for (float& x : p) x += 0.3f * dist(rng);  // biases non-zero too
    }
    std::vector<float> features(4 * 5);
    for (float& x : features) x = dist(rng);
    std::vector<int32_t> labels = {0, 2, 1, 2};

    std::vector<std::vector<float>> grads;
    for (const auto& p : params) grads.emplace_back(p.size());
    ASSERT_OK(mlp->LoadParameters(Const(params)));
    ASSERT_OK(mlp->TrainStep({4, features, labels}, Mutable(grads)));

    auto mean_loss = [&]() {
      EXPECT_OK(mlp->LoadParameters(Const(params)));
      auto stats = mlp->Evaluate({4, features, labels}, {});
      EXPECT_OK(stats);
      return stats->loss_sum / 4;
    };
    const float h = 1e-2f;
    for (size_t v = 0; v < params.size(); ++v) {
      for (size_t i = 0; i < params[v].size(); ++i) {
        const float saved = params[v][i];
        params[v][i] = saved + h;
        const double up = mean_loss();
        params[v][i] = saved - h;
        const double down = mean_loss();
        params[v][i] = saved;
        const double numeric = (up - down) / (2 * h);
        EXPECT_NEAR(grads[v][i], numeric, 2e-3 + 0.02 * std::fabs(numeric))
            << "variable " << v << " element " << i;
      }
    }
  }
}

TEST(MlpTest, SoftmaxRegressionLearnsASeparableProblem) {
  TestSpec spec{2, {}, 2, Activation::kRelu};
  auto device = CreateCpuDevice(1);
  ASSERT_OK_AND_ASSIGN(auto mlp, Define(spec)->Instantiate(device.get(), 64));
  auto params = InitialValues(Define(spec)->variables(), 1);
  std::vector<std::vector<float>> grads;
  for (const auto& p : params) grads.emplace_back(p.size());
  std::mt19937 rng(5);
  std::normal_distribution<float> noise(0, 0.3f);
  std::vector<float> features(64 * 2);
  std::vector<int32_t> labels(64);
  for (int i = 0; i < 64; ++i) {
    labels[i] = i % 2;
    features[2 * i] = (labels[i] ? 1.0f : -1.0f) + noise(rng);
    features[2 * i + 1] = noise(rng);
  }
  BatchStats stats;
  for (int step = 0; step < 100; ++step) {
    ASSERT_OK(mlp->LoadParameters(Const(params)));
    ASSERT_OK_AND_ASSIGN(
        stats, mlp->TrainStep({64, features, labels}, Mutable(grads)));
    for (size_t v = 0; v < params.size(); ++v) {
      for (size_t i = 0; i < params[v].size(); ++i) {
        params[v][i] -= 0.5f * grads[v][i];
      }
    }
  }
  EXPECT_GE(stats.correct, 60);
  EXPECT_LT(stats.loss_sum / 64, 0.2);
}

TEST(MlpTest, BatchesOfTheWrongShapeAreRejected) {
  TestSpec spec{3, {}, 2, Activation::kRelu};
  auto device = CreateCpuDevice(1);
  ASSERT_OK_AND_ASSIGN(auto mlp, Define(spec)->Instantiate(device.get(), 4));
  std::vector<float> features(2 * 4);
  std::vector<int32_t> labels(2);
  EXPECT_THAT(mlp->Evaluate({2, features, labels}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("takes 3 features per example")));
  std::vector<float> big(5 * 3);
  std::vector<int32_t> big_labels(5);
  EXPECT_THAT(
      mlp->Evaluate({5, big, big_labels}, {}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("takes 1 to 4")));
}

}  // namespace
}  // namespace psflow
