// `model.layers` networks (run as graphs: model/graph/layers_graph.cc) on
// the CPU device: gradients against finite differences, threads, batch
// normalization's statistics, dropout's seeds, names and errors.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "model/device/cpu/cpu_device.h"
#include "model/initializer.h"
#include "model/layers/layer.h"
#include "model/registry.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<ModelDefinition> Define(const std::string& layers_json,
                                        Shape example, int64_t classes) {
  ModelConfig config;
  google::protobuf::util::JsonParseOptions options;
  const auto parsed = google::protobuf::util::JsonStringToMessage(
      absl::StrCat(R"({"layers": )", layers_json, "}"), &config, options);
  EXPECT_TRUE(parsed.ok()) << parsed.ToString();
  auto definition = DefineModel(config, InputSpec{std::move(example), classes});
  EXPECT_OK(definition.status());
  return definition.ok() ? *std::move(definition) : nullptr;
}

// A model with its parameters and a fixed batch, for gradient checks.
class Harness {
 public:
  Harness(const std::string& layers_json, Shape example, int64_t classes,
          int64_t batch, uint64_t seed = 7, int threads = 1)
      : definition_(Define(layers_json, example, classes)),
        device_(CreateCpuDevice(threads)),
        batch_(batch) {
    model_ = *definition_->Instantiate(device_.get(), batch);
    params_ = InitialValues(definition_->variables(), seed);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> value(-1, 1);
    // Random starting values everywhere (not just the initializers' zeros
    // and ones), so every path carries a gradient.
    for (size_t v = 0; v < params_.size(); ++v) {
      const bool variance = definition_->variables()[v].name().find(
                                "moving_variance") != std::string::npos;
      for (float& x : params_[v]) {
        x = variance ? 0.5f + std::fabs(value(rng)) : x + 0.3f * value(rng);
      }
    }
    features_.resize(batch * definition_->input().num_features());
    for (float& x : features_) x = value(rng);
    std::uniform_int_distribution<int32_t> label(0, classes - 1);
    labels_.resize(batch);
    for (int32_t& y : labels_) y = label(rng);
    for (const ModelVariable& v : definition_->variables()) {
      gradients_.emplace_back(v.num_elements());
    }
  }

  const ModelDefinition& definition() const { return *definition_; }
  std::vector<std::vector<float>>& params() { return params_; }
  std::vector<std::vector<float>>& gradients() { return gradients_; }
  std::vector<float>& features() { return features_; }
  std::vector<int32_t>& labels() { return labels_; }

  ExampleBatch Batch(uint64_t seed) const {
    return ExampleBatch{batch_, features_, labels_, seed};
  }

  // Mean training loss at the current parameters; fills gradients().
  double TrainLoss(uint64_t seed = 99) {
    Load();
    std::vector<absl::Span<float>> spans;
    for (auto& g : gradients_) spans.push_back(absl::MakeSpan(g));
    absl::StatusOr<BatchStats> stats = model_->TrainStep(Batch(seed), spans);
    EXPECT_OK(stats.status());
    return stats.ok() ? stats->loss_sum / batch_ : NAN;
  }

  double EvalLoss() {
    Load();
    absl::StatusOr<BatchStats> stats = model_->Evaluate(Batch(0), {});
    EXPECT_OK(stats.status());
    return stats.ok() ? stats->loss_sum / batch_ : NAN;
  }

  // Every trainable variable's gradient against central differences of the
  // training loss (same dropout masks), in double-checked float32.
  void ExpectGradientsMatchFiniteDifferences() {
    TrainLoss();
    const std::vector<std::vector<float>> analytic = gradients_;
    std::mt19937 rng(6);
    for (size_t v = 0; v < params_.size(); ++v) {
      const ModelVariable& var = definition_->variables()[v];
      if (!var.trainable()) continue;
      SCOPED_TRACE(var.name());
      // Up to 12 elements per variable, spread over it.
      std::uniform_int_distribution<size_t> pick(0, params_[v].size() - 1);
      for (int probe = 0; probe < 12; ++probe) {
        const size_t i = probe == 0 ? 0 : pick(rng);
        const float saved = params_[v][i];
        const float h = 1e-3f;
        params_[v][i] = saved + h;
        const double up = TrainLoss();
        params_[v][i] = saved - h;
        const double down = TrainLoss();
        params_[v][i] = saved;
        const double numeric = (up - down) / (2 * h);
        EXPECT_NEAR(analytic[v][i], numeric, 2e-3 + 2e-2 * std::fabs(numeric))
            << "element " << i;
      }
    }
  }

 private:
  void Load() {
    std::vector<absl::Span<const float>> spans;
    for (const auto& p : params_) spans.push_back(p);
    ASSERT_OK(model_->LoadParameters(spans));
  }

  std::unique_ptr<ModelDefinition> definition_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<Model> model_;
  const int64_t batch_;
  std::vector<std::vector<float>> params_, gradients_;
  std::vector<float> features_;
  std::vector<int32_t> labels_;
};

// Each layer sits between a trainable layer and the loss, so a wrong
// backward pass (its input gradient or its own variables') shows up in the
// trainable variables' gradients.
TEST(SequentialTest, Conv2DGradientsMatchFiniteDifferences) {
  for (const char* conv : {
           R"({"Conv2D": {"filters": 3, "kernel_size": [3], "padding": "same",
                          "activation": "tanh"}})",
           R"({"Conv2D": {"filters": 3, "kernel_size": [3, 2], "strides": [2],
                          "padding": "same", "use_bias": false}})",
           R"({"Conv2D": {"filters": 2, "kernel_size": [1]}})"}) {
    SCOPED_TRACE(conv);
    Harness h(absl::StrCat(R"([)", conv, R"(,
        {"Conv2D": {"filters": 2, "kernel_size": [3], "strides": [2],
                    "activation": "sigmoid"}},
        {"Flatten": {}}, {"Dense": {"units": 4}}])"),
              {7, 7, 2}, 4, 5);
    h.ExpectGradientsMatchFiniteDifferences();
  }
}

TEST(SequentialTest, PoolingGradientsMatchFiniteDifferences) {
  for (
      const char* pool :
      {R"({"MaxPooling2D": {}})",
       R"({"MaxPooling2D": {"pool_size": [3], "strides": [2], "padding": "same"}})",
       R"({"AveragePooling2D": {"pool_size": [3], "strides": [2], "padding": "same"}})",
       R"({"GlobalAveragePooling2D": {}})"}) {
    SCOPED_TRACE(pool);
    Harness h(
        absl::StrCat(R"([{"Conv2D": {"filters": 3, "kernel_size": [2]}}, )",
                     pool, R"(, {"Flatten": {}}, {"Dense": {"units": 3}}])"),
        {6, 6, 1}, 3, 4);
    h.ExpectGradientsMatchFiniteDifferences();
  }
}

TEST(SequentialTest, BatchNormalizationGradientsInTrainingMode) {
  for (const char* bn :
       {R"({"BatchNormalization": {}})",
        R"({"BatchNormalization": {"scale": false, "center": true}})",
        R"({"BatchNormalization": {"scale": true, "center": false}})"}) {
    SCOPED_TRACE(bn);
    Harness h(
        absl::StrCat(R"([{"Conv2D": {"filters": 3, "kernel_size": [3]}}, )", bn,
                     R"(, {"Activation": {"activation": "tanh"}},
                     {"Flatten": {}}, {"Dense": {"units": 3}}, )",
                     bn, "]"),
        {5, 5, 2}, 3, 6);
    h.ExpectGradientsMatchFiniteDifferences();
  }
}

TEST(SequentialTest, DenseActivationRescalingAndDropoutGradients) {
  Harness h(R"([{"Rescaling": {"scale": 0.5, "offset": 0.1}},
                {"Flatten": {}},
                {"Dense": {"units": 6, "activation": "tanh"}},
                {"Dropout": {"rate": 0.5}},
                {"Dense": {"units": 5}}, {"ReLU": {}},
                {"Dense": {"units": 3}}])",
            {4, 3}, 3, 8);
  h.ExpectGradientsMatchFiniteDifferences();
}

// The CPU device splits each layer's work over its threads: the Keras
// guide's convnet (configs/fashion_mnist_convnet.json) takes the same step
// on every run with 3 threads, and within float rounding of 1 thread's.
TEST(SequentialTest, TheConvnetStepIsTheSameOnOneAndThreeThreads) {
  const std::string convnet = R"([{"Rescaling": {"scale": 0.5}},
      {"Conv2D": {"filters": 12, "kernel_size": [3, 3], "padding": "same",
                  "use_bias": false}},
      {"BatchNormalization": {"center": true, "scale": false}}, {"ReLU": {}},
      {"Conv2D": {"filters": 24, "kernel_size": [6, 6], "strides": [2, 2]}},
      {"BatchNormalization": {}}, {"ReLU": {}},
      {"Conv2D": {"filters": 32, "kernel_size": [6, 6], "strides": [2, 2],
                  "padding": "same"}},
      {"BatchNormalization": {"center": true, "scale": false}}, {"ReLU": {}},
      {"GlobalAveragePooling2D": {}},
      {"Dense": {"units": 256, "activation": "relu"}},
      {"Dropout": {"rate": 0.5}}, {"Dense": {"units": 10}}])";
  // A batch big enough that every layer splits (3 chunks of images).
  Harness one(convnet, {28, 28}, 10, 24, 7, /*threads=*/1);
  Harness three(convnet, {28, 28}, 10, 24, 7, /*threads=*/3);
  const double one_loss = one.TrainLoss();
  const double three_loss = three.TrainLoss();
  const std::vector<std::vector<float>> three_gradients = three.gradients();
  EXPECT_EQ(three.TrainLoss(), three_loss) << "3 threads, run twice";
  EXPECT_EQ(three.gradients(), three_gradients) << "3 threads, run twice";
  EXPECT_NEAR(three_loss, one_loss, 1e-5 * std::fabs(one_loss));
  for (size_t v = 0; v < one.gradients().size(); ++v) {
    SCOPED_TRACE(one.definition().variables()[v].name());
    const std::vector<float>& want = one.gradients()[v];
    const std::vector<float>& got = three_gradients[v];
    // Relative to the variable's largest gradient (small ones are sums that
    // mostly cancel), with a floor for those that are 0 but for rounding (a
    // bias before batch norm).
    float scale = 0;
    for (float g : want) scale = std::max(scale, std::fabs(g));
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-4f * scale + 1e-6f) << "element " << i;
    }
  }
}

// The moving statistics' "gradients" are the batch's per-channel mean and
// biased variance of the layer's input.
TEST(SequentialTest, BatchNormalizationPushesTheBatchStatistics) {
  Harness h(R"([{"BatchNormalization": {}}, {"Flatten": {}},
                {"Dense": {"units": 2}}])",
            {3, 2, 2}, 2, 5);
  h.TrainLoss();
  const auto& x = h.features();
  const int64_t rows = 5 * 3 * 2, channels = 2;
  for (int64_t c = 0; c < channels; ++c) {
    double mean = 0, var = 0;
    for (int64_t r = 0; r < rows; ++r) mean += x[r * channels + c];
    mean /= rows;
    for (int64_t r = 0; r < rows; ++r) {
      var += (x[r * channels + c] - mean) * (x[r * channels + c] - mean);
    }
    var /= rows;
    // Variables: gamma, beta, moving_mean, moving_variance, dense/...
    EXPECT_NEAR(h.gradients()[2][c], mean, 1e-5);
    EXPECT_NEAR(h.gradients()[3][c], var, 1e-5);
  }
}

// Inference normalizes with the moving statistics: the same as feeding
// pre-normalized inputs to the model without the layer.
TEST(SequentialTest, InferenceUsesTheMovingStatistics) {
  Harness with_bn(R"([{"BatchNormalization": {"scale": false}},
                      {"Flatten": {}}, {"Dense": {"units": 3}}])",
                  {2, 2, 3}, 3, 4);
  Harness without(R"([{"Flatten": {}}, {"Dense": {"units": 3}}])", {2, 2, 3}, 3,
                  4);
  const auto& p = with_bn.params();  // beta, mean, variance, kernel, bias
  without.params() = {p[3], p[4]};
  without.labels() = with_bn.labels();
  auto& x = without.features();
  x = with_bn.features();
  for (size_t i = 0; i < x.size(); ++i) {
    const int c = i % 3;
    x[i] = (x[i] - p[1][c]) / std::sqrt(p[2][c] + 1e-3f) + p[0][c];
  }
  EXPECT_NEAR(with_bn.EvalLoss(), without.EvalLoss(), 1e-5);
}

TEST(SequentialTest, DropoutIsSeededInTrainingAndOffInInference) {
  Harness with(R"([{"Flatten": {}}, {"Dropout": {"rate": 0.5}},
                   {"Dense": {"units": 3}}])",
               {4, 4}, 3, 6);
  Harness without(R"([{"Flatten": {}}, {"Dense": {"units": 3}}])", {4, 4}, 3,
                  6);
  without.params() = with.params();
  without.features() = with.features();
  without.labels() = with.labels();
  EXPECT_EQ(with.TrainLoss(1), with.TrainLoss(1));
  EXPECT_NE(with.TrainLoss(1), with.TrainLoss(2));
  EXPECT_NE(with.TrainLoss(1), without.TrainLoss(1));
  EXPECT_DOUBLE_EQ(with.EvalLoss(), without.EvalLoss());
}

TEST(SequentialTest, DescribesItselfAndScalesNothingBeforeTheModel) {
  Harness h(R"([{"Flatten": {}}, {"Dense": {"units": 3}}])", {4, 4}, 3, 2);
  EXPECT_EQ(h.definition().Describe(),
            "layers 4x4 -> 2 layers -> 3 classes, 51 trainable parameters");
  EXPECT_EQ(h.definition().feature_scale(), 1.0f);
}

TEST(SequentialTest, RejectsBatchesOfTheWrongShape) {
  auto definition =
      Define(R"([{"Flatten": {}}, {"Dense": {"units": 3}}])", {4, 4}, 3);
  auto device = CreateCpuDevice(1);
  ASSERT_OK_AND_ASSIGN(auto model, definition->Instantiate(device.get(), 2));
  std::vector<float> features(15);
  std::vector<int32_t> labels(1);
  EXPECT_THAT(model->Evaluate({1, features, labels}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("16 features per example")));
  EXPECT_THAT(
      model->Evaluate({3, features, labels}, {}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("takes 1 to 2")));
}

}  // namespace
}  // namespace psflow
