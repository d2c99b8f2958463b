// Every op on the GPU against the CPU backend on the same fresh random
// inputs, at the shapes the benchmarks train with (default MLP 784-256-10 at
// batch 64, a 4096-wide layer at batch 1024; for the layer ops, a small
// Fashion-MNIST CNN's convolutions, pooling and batch norm, plus strided,
// padded, asymmetric and global windows). GPU outputs are NaN-filled
// before each op, so an op that skips an element fails. Relative error
// bounds (|gpu - cpu| <= bound * (1 + |cpu|)) are stated per op; 0 means
// the same bits. Both sides compute in float32.
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

  // Values from {-1, 0, 1}: windows full of ties.
  std::vector<float> Ties(size_t n) {
    std::uniform_int_distribution<int> dist(-1, 1);
    std::vector<float> v(n);
    for (float& x : v) x = static_cast<float>(dist(rng_));
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

  // For sums: the bound is the rounding of `terms` float32 additions whose
  // absolute values total `magnitude` (a CPU array), see ExpectSameSum.
  void ExpectSameSums(const Both& both, const DeviceArray& magnitude,
                      int64_t terms) {
    std::vector<float> cpu(both.cpu->size()), gpu(both.gpu->size()),
        bound(magnitude.size());
    ASSERT_OK(cpu_->Download(*both.cpu, absl::MakeSpan(cpu)));
    ASSERT_OK(gpu_->Download(*both.gpu, absl::MakeSpan(gpu)));
    ASSERT_OK(cpu_->Download(magnitude, absl::MakeSpan(bound)));
    ExpectSameSum(gpu, cpu, bound, terms);
  }

  // `host` with every value replaced by its absolute value, on the CPU.
  std::shared_ptr<DeviceArray> AbsOnCpu(std::vector<float> host) {
    for (float& x : host) x = std::fabs(x);
    std::shared_ptr<DeviceArray> out = *cpu_->Allocate(host.size());
    EXPECT_OK(cpu_->Upload(host, *out));
    return out;
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

// Gemm: within the rounding of k float32 products summed in another order
// (cuBLAS and OpenBLAS block k differently; on an H100 they differ by up to
// 1.9e-5 on elements of 0.15 at k = 1024, while any wrong or missing term
// is off by far more than the bound).
TEST_F(CudaVsCpuTest, GemmAgreesAtTheBenchmarkShapes) {
  for (const GemmShape& s : kShapes) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        SCOPED_TRACE(testing::Message()
                     << s.m << "x" << s.n << "x" << s.k << " trans_a=" << ta
                     << " trans_b=" << tb);
        const std::vector<float> a_host = Random(s.m * s.k);
        const std::vector<float> b_host = Random(s.k * s.n);
        Both a = On(a_host), b = On(b_host);
        Both c = Output(s.m * s.n);
        ASSERT_OK(
            cpu_->Gemm(ta, tb, s.m, s.n, s.k, 1, *a.cpu, *b.cpu, 0, *c.cpu));
        ASSERT_OK(
            gpu_->Gemm(ta, tb, s.m, s.n, s.k, 1, *a.gpu, *b.gpu, 0, *c.gpu));
        std::shared_ptr<DeviceArray> magnitude = *cpu_->Allocate(s.m * s.n);
        ASSERT_OK(cpu_->Gemm(ta, tb, s.m, s.n, s.k, 1, *AbsOnCpu(a_host),
                             *AbsOnCpu(b_host), 0, *magnitude));
        ExpectSameSums(c, *magnitude, s.k);
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

// Column sums: within the rounding of `rows` float32 additions in another
// order.
TEST_F(CudaVsCpuTest, ColumnSumsAgree) {
  for (auto [rows, cols] :
       {std::pair<int64_t, int64_t>{64, 256}, {1024, 4096}, {1024, 10}}) {
    SCOPED_TRACE(testing::Message() << rows << "x" << cols);
    const std::vector<float> x_host = Random(rows * cols);
    Both x = On(x_host), sums = Output(cols);
    ASSERT_OK(cpu_->ColumnSums(rows, cols, *x.cpu, *sums.cpu));
    ASSERT_OK(gpu_->ColumnSums(rows, cols, *x.gpu, *sums.gpu));
    std::shared_ptr<DeviceArray> magnitude = *cpu_->Allocate(cols);
    ASSERT_OK(cpu_->ColumnSums(rows, cols, *AbsOnCpu(x_host), *magnitude));
    ExpectSameSums(sums, *magnitude, rows);
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

// Activate (out of place and in place), scale + shift and products: 1e-6
// relative; dropout masks: the same bits (dropout_hash.h on both sides).
TEST_F(CudaVsCpuTest, ElementwiseLayerOpsAgree) {
  const int64_t n = 64 * 28 * 28 * 12 + 3;  // not a multiple of a block
  for (Activation act : {Activation::kNone, Activation::kRelu,
                         Activation::kTanh, Activation::kSigmoid}) {
    SCOPED_TRACE(testing::Message() << "act " << static_cast<int>(act));
    Both x = On(Random(n, -4, 4)), y = Output(n);
    ASSERT_OK(cpu_->Activate(n, act, *x.cpu, *y.cpu));
    ASSERT_OK(gpu_->Activate(n, act, *x.gpu, *y.gpu));
    ExpectSame(y, 1e-6f);
    ASSERT_OK(cpu_->Activate(n, act, *x.cpu, *x.cpu));
    ASSERT_OK(gpu_->Activate(n, act, *x.gpu, *x.gpu));
    ExpectSame(x, 1e-6f);
  }
  Both a = On(Random(n)), b = On(Random(n)), out = Output(n);
  ASSERT_OK(cpu_->ScaleShift(n, 2.5f, -0.75f, *a.cpu, *out.cpu));
  ASSERT_OK(gpu_->ScaleShift(n, 2.5f, -0.75f, *a.gpu, *out.gpu));
  ExpectSame(out, 1e-6f);
  ASSERT_OK(cpu_->ScaleShift(n, 1.0f / 255, 0.0f, *a.cpu, *a.cpu));
  ASSERT_OK(gpu_->ScaleShift(n, 1.0f / 255, 0.0f, *a.gpu, *a.gpu));
  ExpectSame(a, 1e-6f);
  ASSERT_OK(cpu_->Multiply(n, *a.cpu, *b.cpu, *out.cpu));
  ASSERT_OK(gpu_->Multiply(n, *a.gpu, *b.gpu, *out.gpu));
  ExpectSame(out, 1e-6f);
  ASSERT_OK(cpu_->Multiply(n, *a.cpu, *b.cpu, *b.cpu));
  ASSERT_OK(gpu_->Multiply(n, *a.gpu, *b.gpu, *b.gpu));
  ExpectSame(b, 1e-6f);
  for (float rate : {0.0f, 0.25f, 0.5f, 0.9f}) {
    for (uint64_t seed : {uint64_t{0}, uint64_t{20240611}, ~uint64_t{0}}) {
      SCOPED_TRACE(testing::Message() << "rate " << rate << " seed " << seed);
      Both mask = Output(n);
      ASSERT_OK(cpu_->DropoutMask(n, rate, seed, *mask.cpu));
      ASSERT_OK(gpu_->DropoutMask(n, rate, seed, *mask.gpu));
      ExpectSame(mask, 0);
    }
  }
}

struct NamedWindow {
  const char* name;
  WindowGeometry g;  // {n, h, w, c, kh, kw, sh, sw, pad_top, pad_left, oh, ow}
};
// A small CNN's layers at batch 16, and the corners: "same" padding with
// stride 2 (even and odd inputs), unequal window sides and strides, and a
// window as large as the image (global average pooling).
const NamedWindow kWindows[] = {
    {"3x3 same, 1 channel", {16, 28, 28, 1, 3, 3, 1, 1, 1, 1, 28, 28}},
    {"3x3 valid, 12 channels", {16, 14, 14, 12, 3, 3, 1, 1, 0, 0, 12, 12}},
    {"2x2 stride 2", {16, 28, 28, 12, 2, 2, 2, 2, 0, 0, 14, 14}},
    {"6x6 stride 2 same", {4, 12, 12, 8, 6, 6, 2, 2, 2, 2, 6, 6}},
    {"3x3 stride 2 same, odd", {8, 13, 13, 4, 3, 3, 2, 2, 1, 1, 7, 7}},
    {"3x2 strides 2x1", {4, 9, 7, 3, 3, 2, 2, 1, 1, 0, 5, 7}},
    {"global 7x7", {16, 7, 7, 32, 7, 7, 1, 1, 0, 0, 1, 1}},
};

// Im2Col: the same bits (copies). Col2Im: 1e-6 (the GPU gathers in the
// order the CPU scatters, so in practice the same bits too).
TEST_F(CudaVsCpuTest, Im2ColAndCol2ImAgree) {
  for (const NamedWindow& w : kWindows) {
    SCOPED_TRACE(w.name);
    const WindowGeometry& g = w.g;
    const int64_t patch = g.patch_rows() * g.patch_cols();
    Both x = On(Random(g.input_size())), cols = Output(patch);
    ASSERT_OK(cpu_->Im2Col(g, *x.cpu, *cols.cpu));
    ASSERT_OK(gpu_->Im2Col(g, *x.gpu, *cols.gpu));
    ExpectSame(cols, 0);
    Both grad = On(Random(patch)), dx = Output(g.input_size());
    ASSERT_OK(cpu_->Col2Im(g, *grad.cpu, *dx.cpu));
    ASSERT_OK(gpu_->Col2Im(g, *grad.gpu, *dx.gpu));
    ExpectSame(dx, 1e-6f);
  }
}

// Pooling forward (max: the same bits; average: 1e-6) and backward (1e-6),
// on uniform inputs, on inputs full of ties (max routes to the first
// maximal element on both) and on negative inputs (padding must not count
// as a zero).
TEST_F(CudaVsCpuTest, PoolingAgrees) {
  for (const NamedWindow& w : kWindows) {
    for (PoolKind kind : {PoolKind::kMax, PoolKind::kAverage}) {
      for (int inputs = 0; inputs < 3; ++inputs) {
        SCOPED_TRACE(testing::Message()
                     << w.name << (kind == PoolKind::kMax ? " max" : " average")
                     << " inputs " << inputs);
        const WindowGeometry& g = w.g;
        const int64_t out = g.output_size(g.c);
        Both x = On(inputs == 0   ? Random(g.input_size())
                    : inputs == 1 ? Ties(g.input_size())
                                  : Random(g.input_size(), -2, -1));
        Both y = Output(out);
        ASSERT_OK(cpu_->Pool(kind, g, *x.cpu, *y.cpu));
        ASSERT_OK(gpu_->Pool(kind, g, *x.gpu, *y.gpu));
        ExpectSame(y, kind == PoolKind::kMax ? 0 : 1e-6f);
        Both dy = On(Random(out)), dx = Output(g.input_size());
        ASSERT_OK(
            cpu_->PoolBackward(kind, g, *x.cpu, *y.cpu, *dy.cpu, *dx.cpu));
        ASSERT_OK(
            gpu_->PoolBackward(kind, g, *x.gpu, *y.gpu, *dy.gpu, *dx.gpu));
        ExpectSame(dx, 1e-6f);
      }
    }
  }
}

struct ChannelShape {
  int64_t rows, channels;
  float offset;  // added to inputs in [-1, 1]: tests cancellation
};
// A CNN's batch norms at batch 64 (28x28x12, 14x14x32, 7x7x64), more
// channels than a block's threads, one row, no rows.
constexpr ChannelShape kChannelShapes[] = {{64 * 28 * 28, 12, 0},
                                           {64 * 14 * 14, 32, 0},
                                           {64 * 7 * 7, 64, 100},
                                           {1000, 300, 0},
                                           {1, 5, 0},
                                           {0, 3, 0}};

// Moments: mean 1e-5, variance 1e-4 (one-pass Welford in float against
// two passes in double; the offset rows have mean 100 and variance 1/3).
TEST_F(CudaVsCpuTest, ChannelMomentsAgree) {
  for (const ChannelShape& s : kChannelShapes) {
    SCOPED_TRACE(testing::Message() << s.rows << " x " << s.channels);
    Both x = On(Random(s.rows * s.channels, s.offset - 1, s.offset + 1));
    Both mean = Output(s.channels), var = Output(s.channels);
    ASSERT_OK(
        cpu_->ChannelMoments(s.rows, s.channels, *x.cpu, *mean.cpu, *var.cpu));
    ASSERT_OK(
        gpu_->ChannelMoments(s.rows, s.channels, *x.gpu, *mean.gpu, *var.gpu));
    ExpectSame(mean, 1e-5f);
    ExpectSame(var, 1e-4f);
  }
}

// Batch norm forward: 1e-5; backward: dx 1e-5, dgamma and dbeta (sums over
// up to 50k rows) 1e-4. With and without gamma/beta, in place (y = x, dx =
// dy) and not, with and without the parameter gradients.
TEST_F(CudaVsCpuTest, BatchNormAgrees) {
  constexpr float kEpsilon = 1e-3f;
  for (const ChannelShape& s : kChannelShapes) {
    for (bool affine : {false, true}) {
      for (bool in_place : {false, true}) {
        SCOPED_TRACE(testing::Message()
                     << s.rows << " x " << s.channels << " affine " << affine
                     << " in place " << in_place);
        const int64_t n = s.rows * s.channels;
        const std::vector<float> host_x = Random(n, s.offset - 1, s.offset + 1);
        // The same statistics on both sides (the CPU's), so that only the
        // op under test differs.
        std::vector<float> host_mean(s.channels), host_var(s.channels);
        {
          Both x = On(host_x), mean = Output(s.channels),
               var = Output(s.channels);
          ASSERT_OK(cpu_->ChannelMoments(s.rows, s.channels, *x.cpu, *mean.cpu,
                                         *var.cpu));
          ASSERT_OK(cpu_->Download(*mean.cpu, absl::MakeSpan(host_mean)));
          ASSERT_OK(cpu_->Download(*var.cpu, absl::MakeSpan(host_var)));
        }
        Both x = On(host_x), mean = On(host_mean), var = On(host_var);
        Both gamma = On(Random(s.channels, 0.5f, 1.5f));
        Both beta = On(Random(s.channels));
        Both y = in_place ? On(host_x) : Output(n);
        const Both& y_in = in_place ? y : x;
        ASSERT_OK(cpu_->BatchNormApply(
            s.rows, s.channels, *y_in.cpu, *mean.cpu, *var.cpu, kEpsilon,
            affine ? gamma.cpu.get() : nullptr,
            affine ? beta.cpu.get() : nullptr, *y.cpu));
        ASSERT_OK(gpu_->BatchNormApply(
            s.rows, s.channels, *y_in.gpu, *mean.gpu, *var.gpu, kEpsilon,
            affine ? gamma.gpu.get() : nullptr,
            affine ? beta.gpu.get() : nullptr, *y.gpu));
        ExpectSame(y, 1e-5f);

        Both dy = On(Random(n)), dx = in_place ? dy : Output(n);
        Both dgamma = Output(s.channels), dbeta = Output(s.channels);
        ASSERT_OK(cpu_->BatchNormBackward(
            s.rows, s.channels, *x.cpu, *mean.cpu, *var.cpu, kEpsilon,
            affine ? gamma.cpu.get() : nullptr, *dy.cpu, *dx.cpu,
            affine ? dgamma.cpu.get() : nullptr,
            affine ? dbeta.cpu.get() : nullptr));
        ASSERT_OK(gpu_->BatchNormBackward(
            s.rows, s.channels, *x.gpu, *mean.gpu, *var.gpu, kEpsilon,
            affine ? gamma.gpu.get() : nullptr, *dy.gpu, *dx.gpu,
            affine ? dgamma.gpu.get() : nullptr,
            affine ? dbeta.gpu.get() : nullptr));
        ExpectSame(dx, 1e-5f);
        if (affine) {
          ExpectSame(dgamma, 1e-4f);
          ExpectSame(dbeta, 1e-4f);
        }
      }
    }
  }
}

}  // namespace
}  // namespace psflow::cuda
