// Every op on the GPU against the CPU backend on the same fresh random
// inputs, at the shapes the benchmarks train with (default MLP 784-256-10 at
// batch 64, a 4096-wide layer at batch 1024). GPU outputs are NaN-filled
// before each op. Relative error bounds (|gpu - cpu| <= bound * (1 + |cpu|))
// are stated per op; both sides compute in float32.
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "common/status_matchers.h"
#include "gtest/gtest.h"
#include "model/device/cpu/cpu_device.h"
#include "model/device/cuda/cuda_device.h"
#include "model/device/device_test_util.h"

namespace psflow::cuda {
namespace {

class CudaVsCpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Device>> gpu =
        CreateCudaDevice(CudaBackendOptions());
    PSFLOW_SKIP_IF_ABSENT(gpu.status());
    ASSERT_OK(gpu.status());
    gpu_ = *std::move(gpu);
    cpu_ = CreateCpuDevice(4);
  }

  std::vector<float> Random(size_t n, float lo = -1, float hi = 1) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng_);
    return v;
  }

  // The same values on both devices (`poison`: NaN on the GPU instead).
  struct Both {
    std::shared_ptr<DeviceArray> cpu, gpu;
  };
  Both On(const std::vector<float>& host, bool poison = false) {
    Both both{*cpu_->Allocate(host.size()), *gpu_->Allocate(host.size())};
    EXPECT_OK(cpu_->Upload(host, *both.cpu));
    EXPECT_OK(gpu_->Upload(
        poison ? std::vector<float>(host.size(), std::nanf("")) : host,
        *both.gpu));
    return both;
  }
  Both Output(size_t n) { return On(std::vector<float>(n, 0.0f), true); }

  void ExpectSame(const Both& both, float relative) {
    std::vector<float> cpu(both.cpu->size()), gpu(both.gpu->size());
    ASSERT_OK(cpu_->Download(*both.cpu, absl::MakeSpan(cpu)));
    ASSERT_OK(gpu_->Download(*both.gpu, absl::MakeSpan(gpu)));
    ExpectNear(gpu, cpu, relative);
  }

  std::unique_ptr<Device> cpu_, gpu_;
  std::mt19937 rng_{20240611};
};

struct GemmShape {
  int64_t m, n, k;
};
// Forward, weight gradient and input gradient of both benchmark models.
constexpr GemmShape kShapes[] = {
    {64, 256, 784},    {784, 256, 64},    {64, 784, 256},      // default MLP
    {1024, 4096, 512}, {512, 4096, 1024}, {1024, 512, 4096}};  // 4096-wide

// Gemm: 1e-5 relative (k <= 4096 products of values in [-1, 1]).
TEST_F(CudaVsCpuTest, GemmAgreesAtTheBenchmarkShapes) {
  for (const GemmShape& s : kShapes) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        SCOPED_TRACE(testing::Message()
                     << s.m << "x" << s.n << "x" << s.k << " trans_a=" << ta
                     << " trans_b=" << tb);
        Both a = On(Random(s.m * s.k)), b = On(Random(s.k * s.n));
        Both c = Output(s.m * s.n);
        ASSERT_OK(
            cpu_->Gemm(ta, tb, s.m, s.n, s.k, 1, *a.cpu, *b.cpu, 0, *c.cpu));
        ASSERT_OK(
            gpu_->Gemm(ta, tb, s.m, s.n, s.k, 1, *a.gpu, *b.gpu, 0, *c.gpu));
        ExpectSame(c, 1e-5f);
      }
    }
  }
}

// Bias + activation and its backward: 1e-6 relative.
TEST_F(CudaVsCpuTest, ElementwiseOpsAgree) {
  for (auto [rows, cols] :
       {std::pair<int64_t, int64_t>{64, 256}, {1024, 4096}, {1024, 10}}) {
    for (Activation act : {Activation::kNone, Activation::kRelu,
                           Activation::kTanh, Activation::kSigmoid}) {
      SCOPED_TRACE(testing::Message()
                   << rows << "x" << cols << " act " << static_cast<int>(act));
      Both z = On(Random(rows * cols, -4, 4)), bias = On(Random(cols));
      ASSERT_OK(cpu_->BiasActivation(rows, cols, *bias.cpu, act, *z.cpu));
      ASSERT_OK(gpu_->BiasActivation(rows, cols, *bias.gpu, act, *z.gpu));
      ExpectSame(z, 1e-6f);
      Both grad = On(Random(rows * cols));
      ASSERT_OK(cpu_->ActivationBackward(rows * cols, act, *z.cpu, *grad.cpu));
      ASSERT_OK(gpu_->ActivationBackward(rows * cols, act, *z.gpu, *grad.gpu));
      ExpectSame(grad, 1e-6f);
    }
  }
}

// Column sums: 1e-5 relative (1024 float additions in different orders).
TEST_F(CudaVsCpuTest, ColumnSumsAgree) {
  for (auto [rows, cols] :
       {std::pair<int64_t, int64_t>{64, 256}, {1024, 4096}, {1024, 10}}) {
    SCOPED_TRACE(testing::Message() << rows << "x" << cols);
    Both x = On(Random(rows * cols)), sums = Output(cols);
    ASSERT_OK(cpu_->ColumnSums(rows, cols, *x.cpu, *sums.cpu));
    ASSERT_OK(gpu_->ColumnSums(rows, cols, *x.gpu, *sums.gpu));
    ExpectSame(sums, 1e-5f);
  }
}

// Softmax cross-entropy: gradient 1e-5, loss sum 1e-5 relative; argmax
// predictions and the correct count exact.
TEST_F(CudaVsCpuTest, SoftmaxCrossEntropyAgrees) {
  for (auto [rows, classes] :
       {std::pair<int64_t, int64_t>{64, 10}, {1024, 10}, {256, 1000}}) {
    SCOPED_TRACE(testing::Message() << rows << " x " << classes);
    std::vector<float> labels(rows);
    std::uniform_int_distribution<int> label(0, classes - 1);
    for (float& l : labels) l = static_cast<float>(label(rng_));
    Both logits = On(Random(rows * classes, -8, 8)), y = On(labels);
    Both grad = Output(rows * classes), pred = Output(rows), stats = Output(2);
    ASSERT_OK(cpu_->SoftmaxCrossEntropy(rows, classes, *logits.cpu, *y.cpu,
                                        grad.cpu.get(), *pred.cpu, *stats.cpu));
    ASSERT_OK(gpu_->SoftmaxCrossEntropy(rows, classes, *logits.gpu, *y.gpu,
                                        grad.gpu.get(), *pred.gpu, *stats.gpu));
    ExpectSame(grad, 1e-5f);
    ExpectSame(pred, 0);
    ExpectSame(stats, 1e-5f);
  }
}

}  // namespace
}  // namespace psflow::cuda
