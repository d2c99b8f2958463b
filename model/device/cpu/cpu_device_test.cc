// The CPU backend splits every op over its threads: each op, at sizes that
// do split, gives the same result on every run with one thread count and
// results within float rounding of the one-thread ones with three. (That
// each op is right at all is the conformance suite's job, device_test.)
#include "model/device/cpu/cpu_device.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <random>
#include <vector>

#include "common/status_matchers.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

// Runs op on a device and returns what it wrote.
using Op = std::function<std::vector<float>(Device&)>;

class CpuDeviceThreadsTest : public ::testing::Test {
 protected:
  std::vector<float> Random(size_t n) {
    std::uniform_real_distribution<float> dist(-1, 1);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng_);
    return v;
  }

  // Runs `op` with 1 thread and twice with 3: the two 3-thread runs must
  // agree bit for bit, and with the 1-thread run within
  // relative * (1 + |one-thread value|).
  void ExpectSameOnOneAndThreeThreads(const Op& op, float relative) {
    const std::vector<float> one = op(*one_);
    const std::vector<float> three = op(*three_);
    const std::vector<float> again = op(*three_);
    ASSERT_EQ(one.size(), three.size());
    EXPECT_EQ(three, again) << "3 threads, run twice";
    int reported = 0;
    for (size_t i = 0; i < one.size(); ++i) {
      const float bound = relative * (1 + std::fabs(one[i]));
      if (!(std::fabs(three[i] - one[i]) <= bound) && reported++ < 5) {
        ADD_FAILURE() << "element " << i << ": 3 threads " << three[i]
                      << ", 1 thread " << one[i];
      }
    }
  }

  static std::shared_ptr<DeviceArray> On(Device& device,
                                         const std::vector<float>& host) {
    auto array = *device.Allocate(host.size());
    EXPECT_OK(device.Upload(host, *array));
    return array;
  }
  static std::shared_ptr<DeviceArray> Zeros(Device& device, int64_t n) {
    return *device.Allocate(n);
  }
  static std::vector<float> Back(Device& device, const DeviceArray& array) {
    std::vector<float> host(array.size());
    EXPECT_OK(device.Download(array, absl::MakeSpan(host)));
    return host;
  }
  // Every array's values, one after the other.
  static std::vector<float> BackAll(
      Device& device, std::initializer_list<const DeviceArray*> arrays) {
    std::vector<float> all;
    for (const DeviceArray* array : arrays) {
      const std::vector<float> values = Back(device, *array);
      all.insert(all.end(), values.begin(), values.end());
    }
    return all;
  }

  // The first convolution of the Keras guide's convnet, on 6 images.
  static WindowGeometry Geometry() {
    WindowGeometry g;
    g.n = 6, g.h = 28, g.w = 28, g.c = 4, g.kh = 3, g.kw = 3;
    g.sh = 1, g.sw = 1, g.pad_top = 1, g.pad_left = 1, g.oh = 28, g.ow = 28;
    return g;
  }

  std::mt19937 rng_{35};
  std::unique_ptr<Device> one_ = CreateCpuDevice(1);
  std::unique_ptr<Device> three_ = CreateCpuDevice(3);
};

TEST_F(CpuDeviceThreadsTest, GemmSplitByRowsOrColumnsMatchesOneThread) {
  // (m, n, k): C tall enough to split by rows, then too short (by columns).
  for (const std::array<int64_t, 3>& shape :
       {std::array<int64_t, 3>{300, 24, 100},
        std::array<int64_t, 3>{20, 500, 200}}) {
    // Named, not a structured binding: clang 14 cannot capture those.
    const int64_t m = shape[0], n = shape[1], k = shape[2];
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        SCOPED_TRACE(::testing::Message() << m << "x" << n << "x" << k
                                          << " ta=" << ta << " tb=" << tb);
        const std::vector<float> a = Random(m * k), b = Random(k * n),
                                 c = Random(m * n);
        ExpectSameOnOneAndThreeThreads(
            [&](Device& d) {
              auto out = On(d, c);
              EXPECT_OK(d.Gemm(ta, tb, m, n, k, 0.5f, *On(d, a), *On(d, b),
                               0.25f, *out));
              return Back(d, *out);
            },
            1e-5f);
      }
    }
  }
}

TEST_F(CpuDeviceThreadsTest, ElementwiseOpsMatchOneThread) {
  const int64_t rows = 3000, cols = 40, n = rows * cols;
  const std::vector<float> x = Random(n), y = Random(n), bias = Random(cols);
  for (const Activation act : {Activation::kNone, Activation::kRelu,
                               Activation::kTanh, Activation::kSigmoid}) {
    SCOPED_TRACE(ActivationName(act));
    ExpectSameOnOneAndThreeThreads(
        [&](Device& d) {
          auto z = On(d, x);
          EXPECT_OK(d.BiasActivation(rows, cols, *On(d, bias), act, *z));
          auto grad = On(d, y);
          EXPECT_OK(d.ActivationBackward(n, act, *z, *grad));
          auto activated = Zeros(d, n);
          EXPECT_OK(d.Activate(n, act, *On(d, x), *activated));
          return BackAll(d, {z.get(), grad.get(), activated.get()});
        },
        1e-6f);
  }
  ExpectSameOnOneAndThreeThreads(
      [&](Device& d) {
        auto scaled = Zeros(d, n), product = Zeros(d, n), mask = Zeros(d, n);
        EXPECT_OK(d.ScaleShift(n, 2.0f, -1.0f, *On(d, x), *scaled));
        EXPECT_OK(d.Multiply(n, *On(d, x), *On(d, y), *product));
        EXPECT_OK(d.DropoutMask(n, 0.5f, 99, *mask));
        return BackAll(d, {scaled.get(), product.get(), mask.get()});
      },
      0.0f);
}

TEST_F(CpuDeviceThreadsTest, ColumnSumsMatchOneThread) {
  const int64_t rows = 5000, cols = 12;
  const std::vector<float> x = Random(rows * cols);
  ExpectSameOnOneAndThreeThreads(
      [&](Device& d) {
        auto sums = Zeros(d, cols);
        EXPECT_OK(d.ColumnSums(rows, cols, *On(d, x), *sums));
        return Back(d, *sums);
      },
      1e-4f);
}

TEST_F(CpuDeviceThreadsTest, Im2ColAndCol2ImMatchOneThread) {
  const WindowGeometry g = Geometry();
  const std::vector<float> x = Random(g.input_size());
  const std::vector<float> dcols = Random(g.patch_rows() * g.patch_cols());
  ExpectSameOnOneAndThreeThreads(
      [&](Device& d) {
        auto cols = Zeros(d, g.patch_rows() * g.patch_cols());
        auto dx = On(d, Random(g.input_size()));  // overwritten
        EXPECT_OK(d.Im2Col(g, *On(d, x), *cols));
        EXPECT_OK(d.Col2Im(g, *On(d, dcols), *dx));
        return BackAll(d, {cols.get(), dx.get()});
      },
      0.0f);
}

TEST_F(CpuDeviceThreadsTest, ConvolutionIsBitwiseTheSameOnEveryThreadCount) {
  // The convnet's second layer at batch 19: two images per group, the
  // last one alone, 10 groups in 8 kernel-gradient blocks. Groups and blocks do
  // not depend on the thread count, so neither does any bit of the result.
  WindowGeometry g;
  g.n = 19, g.h = 28, g.w = 28, g.c = 12, g.kh = 6, g.kw = 6, g.sh = 2,
  g.sw = 2, g.oh = 12, g.ow = 12;
  const int64_t filters = 24, k = g.patch_cols(), rows = g.patch_rows();
  const std::vector<float> x = Random(g.input_size());
  const std::vector<float> kernel = Random(k * filters);
  const std::vector<float> dy = Random(rows * filters);
  ExpectSameOnOneAndThreeThreads(
      [&](Device& d) {
        auto cols = Zeros(d, rows * k), dcols = Zeros(d, rows * k);
        auto y = Zeros(d, rows * filters), dkernel = Zeros(d, k * filters);
        auto dx = On(d, Random(g.input_size()));  // overwritten
        auto dev_x = On(d, x), dev_kernel = On(d, kernel);
        EXPECT_OK(d.ConvForward(g, filters, *dev_x, *dev_kernel, *cols, *y));
        EXPECT_OK(d.ConvBackward(g, filters, *dev_x, *On(d, dy), *dev_kernel,
                                 *cols, *dcols, *dkernel, dx.get()));
        return BackAll(d, {y.get(), dkernel.get(), dx.get()});
      },
      0.0f);
}

TEST_F(CpuDeviceThreadsTest, PoolingMatchesOneThreadForwardAndBackward) {
  WindowGeometry g = Geometry();
  g.c = 12, g.kh = 2, g.kw = 2, g.sh = 2, g.sw = 2;
  g.pad_top = 0, g.pad_left = 0, g.oh = 14, g.ow = 14;
  const std::vector<float> x = Random(g.input_size());
  const std::vector<float> dy = Random(g.output_size(g.c));
  for (const PoolKind kind : {PoolKind::kMax, PoolKind::kAverage}) {
    ExpectSameOnOneAndThreeThreads(
        [&](Device& d) {
          auto in = On(d, x);
          auto y = Zeros(d, g.output_size(g.c));
          auto dx = On(d, Random(g.input_size()));  // overwritten
          EXPECT_OK(d.Pool(kind, g, *in, *y));
          EXPECT_OK(d.PoolBackward(kind, g, *in, *y, *On(d, dy), *dx));
          return BackAll(d, {y.get(), dx.get()});
        },
        0.0f);
  }
}

TEST_F(CpuDeviceThreadsTest, BatchNormMatchesOneThreadForwardAndBackward) {
  const int64_t rows = 6 * 28 * 28, channels = 12, n = rows * channels;
  std::vector<float> x = Random(n);
  for (float& v : x) v = 3.0f * v + 5.0f;  // far from zero: a real mean
  const std::vector<float> dy = Random(n), gamma = Random(channels),
                           beta = Random(channels);
  ExpectSameOnOneAndThreeThreads(
      [&](Device& d) {
        auto in = On(d, x);
        auto mean = Zeros(d, channels), var = Zeros(d, channels);
        auto y = Zeros(d, n), dx = Zeros(d, n);
        auto dgamma = Zeros(d, channels), dbeta = Zeros(d, channels);
        auto g = On(d, gamma);
        EXPECT_OK(d.ChannelMoments(rows, channels, *in, *mean, *var));
        EXPECT_OK(d.BatchNormApply(rows, channels, *in, *mean, *var, 1e-3f,
                                   g.get(), On(d, beta).get(), *y));
        EXPECT_OK(d.BatchNormBackward(rows, channels, *in, *mean, *var, 1e-3f,
                                      g.get(), *On(d, dy), *dx, dgamma.get(),
                                      dbeta.get()));
        return BackAll(d, {mean.get(), var.get(), y.get(), dx.get(),
                           dgamma.get(), dbeta.get()});
      },
      1e-5f);
}

}  // namespace
}  // namespace psflow
