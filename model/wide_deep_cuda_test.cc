// The wide-and-deep model at the CTR job's shapes (26 fields of 1-3 ids,
// 13 dense features, dimension 16, MLP 256-128) on the GPU and on the CPU
// backend, from the same parameters and rows on the same batches: loss,
// predictions, dense gradients and row gradients agree within float32
// tolerance, for sum and mean pooling, several SGD steps in a row so that
// any drift compounds. The `wide_deep` kind runs as a graph
// (model/graph/wide_deep_graph.cc). Skips without a GPU (tag "gpu").
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "common/status_matchers.h"
#include "gtest/gtest.h"
#include "model/device/cpu/cpu_device.h"
#include "model/device/cuda_backend.h"
#include "model/device/device_test_util.h"
#include "model/registry.h"

namespace psflow {
namespace {

constexpr int kBatch = 512;
constexpr int kUnique = 3000;  // distinct ids in a batch

// The job's defaults: 26 x 16 + 13 -> 256 -> 128 -> 1.
constexpr int kFields = 26;
constexpr int kDense = 13;
constexpr int kDim = 16;

ModelConfig Config(const char* pooling) {
  ModelConfig config;
  config.mutable_wide_deep()->set_pooling(pooling);
  return config;
}

// One side's state: parameters, rows, and their gradients.
struct Side {
  std::vector<std::vector<float>> params, grads;
  std::vector<float> embedding, linear, embedding_grad, linear_grad;
};

// Largest |x| over `v`, at least a tiny positive value.
float Scale(const std::vector<float>& v) {
  float scale = 1e-12f;
  for (float x : v) scale = std::max(scale, std::fabs(x));
  return scale;
}

// got and want agree within `relative` of want's largest magnitude.
void ExpectClose(const std::vector<float>& got, const std::vector<float>& want,
                 float relative, const std::string& what) {
  SCOPED_TRACE(what);
  const float scale = Scale(want);
  std::vector<float> g(got), w(want);
  for (float& x : g) x /= scale;
  for (float& x : w) x /= scale;
  ExpectNear(g, w, relative);
}

class WideDeepCudaTest : public ::testing::TestWithParam<const char*> {};

TEST_P(WideDeepCudaTest, TrainingStepsAgreeWithTheCpu) {
  absl::StatusOr<std::unique_ptr<Device>> gpu =
      OpenCudaBackend(CudaBackendOptions());
  PSFLOW_SKIP_IF_ABSENT(gpu.status());
  ASSERT_OK(gpu.status());
  std::unique_ptr<Device> cpu = CreateCpuDevice(4);
  ASSERT_OK_AND_ASSIGN(
      auto definition,
      DefineModel(Config(GetParam()), InputSpec{{kDense}, 2, kFields}));
  ASSERT_OK_AND_ASSIGN(auto gpu_model,
                       definition->Instantiate(gpu->get(), kBatch));
  ASSERT_OK_AND_ASSIGN(auto cpu_model,
                       definition->Instantiate(cpu.get(), kBatch));

  std::mt19937 random(7);
  std::uniform_real_distribution<float> uniform(-0.1f, 0.1f);
  Side gpu_side, cpu_side;
  for (const ModelVariable& v : definition->variables()) {
    std::vector<float> p(v.num_elements());
    for (float& x : p) x = uniform(random);
    gpu_side.params.push_back(p);
    cpu_side.params.push_back(p);
    gpu_side.grads.emplace_back(p.size());
    cpu_side.grads.emplace_back(p.size());
  }
  std::vector<float> embedding(kUnique * kDim), linear(kUnique);
  for (float& x : embedding) x = uniform(random);
  for (float& x : linear) x = uniform(random);
  for (Side* side : {&gpu_side, &cpu_side}) {
    side->embedding = embedding;
    side->linear = linear;
    side->embedding_grad.resize(embedding.size());
    side->linear_grad.resize(linear.size());
  }

  constexpr float kLearningRate = 0.05f;
  std::uniform_int_distribution<int> bag_size(0, 3), slot(0, kUnique - 1),
      coin(0, 1);
  std::normal_distribution<float> normal;
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE(testing::Message() << "step " << step);
    std::vector<int64_t> offsets = {0}, ids;
    std::vector<int32_t> slots, labels(kBatch);
    for (int b = 0; b < kBatch * kFields; ++b) {
      for (int n = bag_size(random); n > 0; --n) {
        slots.push_back(slot(random));
        ids.push_back(1'000'000 + slots.back());
      }
      offsets.push_back(static_cast<int64_t>(slots.size()));
    }
    std::vector<float> dense(kBatch * kDense);
    for (float& x : dense) x = normal(random);
    for (int32_t& y : labels) y = coin(random);

    BatchStats stats[2];
    std::vector<float> predictions[2];
    Side* sides[2] = {&gpu_side, &cpu_side};
    Model* models[2] = {gpu_model.get(), cpu_model.get()};
    for (int s = 0; s < 2; ++s) {
      Side& side = *sides[s];
      std::fill(side.embedding_grad.begin(), side.embedding_grad.end(), 0.0f);
      std::fill(side.linear_grad.begin(), side.linear_grad.end(), 0.0f);
      SparseBatch sparse;
      sparse.num_fields = kFields;
      sparse.offsets = offsets;
      sparse.ids = ids;
      sparse.slots = slots;
      sparse.num_unique = kUnique;
      sparse.rows = {side.embedding, side.linear};
      sparse.row_gradients = {absl::MakeSpan(side.embedding_grad),
                              absl::MakeSpan(side.linear_grad)};
      ExampleBatch batch;
      batch.size = kBatch;
      batch.features = dense;
      batch.labels = labels;
      batch.sparse = &sparse;
      std::vector<absl::Span<const float>> params;
      std::vector<absl::Span<float>> grads;
      for (const auto& p : side.params) params.push_back(p);
      for (auto& g : side.grads) grads.push_back(absl::MakeSpan(g));
      ASSERT_OK(models[s]->LoadParameters(params));
      predictions[s].resize(kBatch);
      ASSERT_OK(models[s]->Score(batch, absl::MakeSpan(predictions[s])));
      ASSERT_OK_AND_ASSIGN(stats[s], models[s]->TrainStep(batch, grads));
    }
    EXPECT_EQ(stats[0].examples, kBatch);
    EXPECT_NEAR(stats[0].loss_sum, stats[1].loss_sum,
                1e-5 * (1 + std::fabs(stats[1].loss_sum)));
    ExpectClose(predictions[0], predictions[1], 1e-5f, "predictions");
    for (size_t v = 0; v < gpu_side.grads.size(); ++v) {
      ExpectClose(gpu_side.grads[v], cpu_side.grads[v], 1e-4f,
                  definition->variables()[v].name());
    }
    ExpectClose(gpu_side.embedding_grad, cpu_side.embedding_grad, 1e-4f,
                "embedding rows");
    ExpectClose(gpu_side.linear_grad, cpu_side.linear_grad, 1e-4f,
                "linear rows");
    // Plain SGD on each side's own values: any drift compounds.
    for (Side* side : sides) {
      for (size_t v = 0; v < side->params.size(); ++v) {
        for (size_t i = 0; i < side->params[v].size(); ++i)
          side->params[v][i] -= kLearningRate * side->grads[v][i];
      }
      for (size_t i = 0; i < side->embedding.size(); ++i)
        side->embedding[i] -= kLearningRate * side->embedding_grad[i];
      for (size_t i = 0; i < side->linear.size(); ++i)
        side->linear[i] -= kLearningRate * side->linear_grad[i];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Pooling, WideDeepCudaTest,
                         ::testing::Values("sum", "mean"));

}  // namespace
}  // namespace psflow
