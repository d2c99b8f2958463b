// A few SGD training steps of the MLP on the GPU and on the CPU backend,
// from the same initial parameters on the same batches: gradients, losses,
// parameters and evaluation agree within float32 tolerance. The GPU side
// stages parameters and gradients in the device's page-locked host buffers,
// as the trainer does, so the asynchronous copy paths are the ones checked.
// Skips without a GPU (tag "gpu").
#include <algorithm>
#include <cmath>
#include <memory>
#include <ostream>
#include <random>
#include <vector>

#include "common/status_matchers.h"
#include "gtest/gtest.h"
#include "model/device/cpu/cpu_device.h"
#include "model/device/cuda_backend.h"
#include "model/device/device_test_util.h"
#include "model/initializer.h"
#include "model/mlp_test_util.h"
#include "model/registry.h"

namespace psflow {
namespace {

struct Case {
  const char* name;
  TestSpec spec;
  int64_t batch;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class MlpCudaTest : public ::testing::TestWithParam<Case> {};

// Host buffers from `device`, one per variable, holding `values`.
std::vector<std::shared_ptr<HostBuffer>> Stage(
    Device& device, const std::vector<std::vector<float>>& values) {
  std::vector<std::shared_ptr<HostBuffer>> buffers;
  for (const auto& v : values) {
    auto buffer = device.AllocateHost(v.size());
    EXPECT_OK(buffer.status());
    std::copy(v.begin(), v.end(), (*buffer)->span().begin());
    buffers.push_back(*buffer);
  }
  return buffers;
}

std::vector<float> Flat(const std::vector<std::shared_ptr<HostBuffer>>& b) {
  std::vector<float> out;
  for (const auto& x : b)
    out.insert(out.end(), x->span().begin(), x->span().end());
  return out;
}

TEST_P(MlpCudaTest, TrainingStepsAgreeWithTheCpu) {
  absl::StatusOr<std::unique_ptr<Device>> gpu =
      OpenCudaBackend(CudaBackendOptions());
  PSFLOW_SKIP_IF_ABSENT(gpu.status());
  ASSERT_OK(gpu.status());
  auto cpu = CreateCpuDevice(4);
  const TestSpec& spec = GetParam().spec;
  const int64_t batch = GetParam().batch;
  ASSERT_OK_AND_ASSIGN(auto gpu_model,
                       Define(spec)->Instantiate(gpu->get(), batch));
  ASSERT_OK_AND_ASSIGN(auto cpu_model,
                       Define(spec)->Instantiate(cpu.get(), batch));

  const auto initial = InitialValues(Define(spec)->variables(), 11);
  auto gpu_params = Stage(**gpu, initial), cpu_params = Stage(*cpu, initial);
  auto gpu_grads = Stage(**gpu, initial), cpu_grads = Stage(*cpu, initial);
  auto spans = [](std::vector<std::shared_ptr<HostBuffer>>& buffers) {
    std::vector<absl::Span<float>> out;
    for (auto& b : buffers) out.push_back(b->span());
    return out;
  };
  auto const_spans = [](std::vector<std::shared_ptr<HostBuffer>>& buffers) {
    std::vector<absl::Span<const float>> out;
    for (auto& b : buffers) out.push_back(b->span());
    return out;
  };

  std::mt19937 rng(5);
  std::uniform_real_distribution<float> pixel(0, 1);
  std::uniform_int_distribution<int32_t> label(0, spec.classes - 1);
  std::vector<float> features(batch * spec.input);
  std::vector<int32_t> labels(batch);
  constexpr float kLearningRate = 0.1f;
  for (int step = 0; step < 5; ++step) {
    SCOPED_TRACE(testing::Message() << "step " << step);
    for (float& x : features) x = pixel(rng);
    for (int32_t& y : labels) y = label(rng);
    ASSERT_OK(gpu_model->LoadParameters(const_spans(gpu_params)));
    ASSERT_OK(cpu_model->LoadParameters(const_spans(cpu_params)));
    // Each gradient reported once, in the CPU's (backward's) order, its
    // span already final: on CUDA only after the step's Synchronize.
    std::vector<int> gpu_order, cpu_order;
    std::vector<std::vector<float>> at_call(gpu_grads.size());
    ExampleBatch gpu_batch{batch, features, labels};
    gpu_batch.gradient_ready = [&](int v) {
      gpu_order.push_back(v);
      const absl::Span<float> grad = gpu_grads[v]->span();
      at_call[v].assign(grad.begin(), grad.end());
    };
    ExampleBatch cpu_batch{batch, features, labels};
    cpu_batch.gradient_ready = [&](int v) { cpu_order.push_back(v); };
    ASSERT_OK_AND_ASSIGN(BatchStats g,
                         gpu_model->TrainStep(gpu_batch, spans(gpu_grads)));
    ASSERT_OK_AND_ASSIGN(BatchStats c,
                         cpu_model->TrainStep(cpu_batch, spans(cpu_grads)));
    EXPECT_EQ(gpu_order, cpu_order);
    EXPECT_EQ(gpu_order.size(), gpu_grads.size());
    for (size_t v = 0; v < gpu_grads.size(); ++v) {
      const absl::Span<float> grad = gpu_grads[v]->span();
      EXPECT_EQ(at_call[v], std::vector<float>(grad.begin(), grad.end()))
          << "variable " << v;
    }
    // Loss 1e-5 relative; gradients 1e-4 relative to (1 + |cpu|) scaled by
    // the largest gradient (float32 sums over up to 784 inputs).
    EXPECT_NEAR(g.loss_sum, c.loss_sum, 1e-5 * (1 + std::fabs(c.loss_sum)));
    EXPECT_EQ(g.correct, c.correct);
    const std::vector<float> gg = Flat(gpu_grads), cg = Flat(cpu_grads);
    float scale = 0;
    for (float x : cg) scale = std::max(scale, std::fabs(x));
    ASSERT_GT(scale, 0.0f);
    std::vector<float> gg_scaled(gg), cg_scaled(cg);
    for (float& x : gg_scaled) x /= scale;
    for (float& x : cg_scaled) x /= scale;
    ExpectNear(gg_scaled, cg_scaled, 1e-4f);
    // Plain SGD on each side's own parameters: any drift compounds.
    for (size_t v = 0; v < gpu_params.size(); ++v) {
      for (size_t i = 0; i < gpu_params[v]->span().size(); ++i) {
        gpu_params[v]->span()[i] -= kLearningRate * gpu_grads[v]->span()[i];
        cpu_params[v]->span()[i] -= kLearningRate * cpu_grads[v]->span()[i];
      }
    }
  }
  // Parameters after 5 steps: 1e-5 relative.
  ExpectNear(Flat(gpu_params), Flat(cpu_params), 1e-5f);

  // Evaluation on the trained parameters: loss 1e-5 relative, the same
  // predictions (ties are measure-zero with random inputs).
  ASSERT_OK(gpu_model->LoadParameters(const_spans(gpu_params)));
  ASSERT_OK(cpu_model->LoadParameters(const_spans(cpu_params)));
  std::vector<int32_t> gpu_pred(batch, -1), cpu_pred(batch, -2);
  ASSERT_OK_AND_ASSIGN(
      BatchStats g,
      gpu_model->Evaluate({batch, features, labels}, absl::MakeSpan(gpu_pred)));
  ASSERT_OK_AND_ASSIGN(
      BatchStats c,
      cpu_model->Evaluate({batch, features, labels}, absl::MakeSpan(cpu_pred)));
  EXPECT_NEAR(g.loss_sum, c.loss_sum, 1e-5 * (1 + std::fabs(c.loss_sum)));
  EXPECT_EQ(gpu_pred, cpu_pred);
}

INSTANTIATE_TEST_SUITE_P(
    Models, MlpCudaTest,
    ::testing::Values(
        Case{"DefaultJob", TestSpec{784, {256}, 10, Activation::kRelu}, 64},
        Case{"DeepTanh", TestSpec{100, {64, 32}, 7, Activation::kTanh}, 33},
        Case{"SoftmaxRegression", TestSpec{50, {}, 3, Activation::kRelu}, 8},
        Case{"Sigmoid", TestSpec{20, {40}, 5, Activation::kSigmoid}, 16}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace psflow
