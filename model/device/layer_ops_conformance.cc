// The conformance suite's layer ops (Im2Col, Pool, BatchNorm*, ...): each
// against a plain reference written here (double accumulation, no code
// shared with any backend) on fresh random inputs, outputs NaN-poisoned
// first. Part of DeviceConformanceTest, so every backend runs it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "model/device/device_conformance.h"
#include "model/device/dropout_hash.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

// Keras' output size and padding: "same" pads so that out = ceil(in / s),
// the extra row/column (when the total is odd) going after the image.
WindowGeometry Window(int64_t n, int64_t h, int64_t w, int64_t c, int64_t k,
                      int64_t s, bool same) {
  WindowGeometry g;
  g.n = n, g.h = h, g.w = w, g.c = c, g.kh = k, g.kw = k, g.sh = s, g.sw = s;
  if (same) {
    g.oh = (h + s - 1) / s;
    g.ow = (w + s - 1) / s;
    g.pad_top = std::max<int64_t>((g.oh - 1) * s + k - h, 0) / 2;
    g.pad_left = std::max<int64_t>((g.ow - 1) * s + k - w, 0) / 2;
  } else {
    g.oh = (h - k) / s + 1;
    g.ow = (w - k) / s + 1;
  }
  return g;
}

// Geometries covering stride 1 and 2, padding, odd totals and windows the
// size of the image (global pooling).
std::vector<WindowGeometry> Geometries() {
  return {Window(2, 7, 7, 3, 3, 1, true),    Window(2, 12, 12, 5, 6, 2, true),
          Window(3, 12, 12, 4, 6, 2, false), Window(1, 9, 8, 2, 2, 2, true),
          Window(2, 5, 5, 3, 5, 1, false),   Window(2, 6, 6, 1, 1, 1, false)};
}

std::string Describe(const WindowGeometry& g) {
  return absl::StrCat(g.n, "x", g.h, "x", g.w, "x", g.c, " window ", g.kh, "x",
                      g.kw, " stride ", g.sh, " pad ", g.pad_top, ",",
                      g.pad_left, " -> ", g.oh, "x", g.ow);
}

// Index of input (img, y, x, ch), or -1 outside the image.
int64_t InputIndex(const WindowGeometry& g, int64_t img, int64_t y, int64_t x,
                   int64_t ch) {
  if (y < 0 || y >= g.h || x < 0 || x >= g.w) return -1;
  return ((img * g.h + y) * g.w + x) * g.c + ch;
}

// Calls f(output index, input index or -1) for every window element in
// window order.
template <typename F>
void ForEachWindowElement(const WindowGeometry& g, F f) {
  for (int64_t img = 0; img < g.n; ++img) {
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        for (int64_t ky = 0; ky < g.kh; ++ky) {
          for (int64_t kx = 0; kx < g.kw; ++kx) {
            for (int64_t ch = 0; ch < g.c; ++ch) {
              const int64_t row = (img * g.oh + oy) * g.ow + ox;
              const int64_t col = (ky * g.kw + kx) * g.c + ch;
              f(row, col, ch,
                InputIndex(g, img, oy * g.sh - g.pad_top + ky,
                           ox * g.sw - g.pad_left + kx, ch));
            }
          }
        }
      }
    }
  }
}

std::vector<float> ReferenceIm2Col(const WindowGeometry& g,
                                   const std::vector<float>& x) {
  std::vector<float> cols(g.patch_rows() * g.patch_cols());
  ForEachWindowElement(g, [&](int64_t row, int64_t col, int64_t, int64_t in) {
    cols[row * g.patch_cols() + col] = in < 0 ? 0.0f : x[in];
  });
  return cols;
}

std::vector<float> ReferenceCol2Im(const WindowGeometry& g,
                                   const std::vector<float>& cols) {
  std::vector<double> x(g.input_size(), 0.0);
  ForEachWindowElement(g, [&](int64_t row, int64_t col, int64_t, int64_t in) {
    if (in >= 0) x[in] += cols[row * g.patch_cols() + col];
  });
  return std::vector<float>(x.begin(), x.end());
}

struct PoolReference {
  std::vector<float> y, dx;
};

PoolReference ReferencePool(PoolKind kind, const WindowGeometry& g,
                            const std::vector<float>& x,
                            const std::vector<float>& dy) {
  const int64_t outputs = g.output_size(g.c);
  std::vector<double> best(outputs, -std::numeric_limits<double>::infinity());
  std::vector<int64_t> arg(outputs, -1);
  std::vector<double> sum(outputs, 0.0), count(outputs, 0.0);
  ForEachWindowElement(g, [&](int64_t row, int64_t, int64_t ch, int64_t in) {
    if (in < 0) return;
    const int64_t o = row * g.c + ch;
    if (x[in] > best[o]) best[o] = x[in], arg[o] = in;
    sum[o] += x[in];
    count[o] += 1;
  });
  PoolReference ref;
  ref.y.resize(outputs);
  std::vector<double> dx(g.input_size(), 0.0);
  ForEachWindowElement(g, [&](int64_t row, int64_t, int64_t ch, int64_t in) {
    if (in < 0 || kind != PoolKind::kAverage) return;
    const int64_t o = row * g.c + ch;
    dx[in] += dy[o] / count[o];
  });
  for (int64_t o = 0; o < outputs; ++o) {
    ref.y[o] = static_cast<float>(kind == PoolKind::kMax ? best[o]
                                                         : sum[o] / count[o]);
    if (kind == PoolKind::kMax) dx[arg[o]] += dy[o];
  }
  ref.dx.assign(dx.begin(), dx.end());
  return ref;
}

TEST_P(DeviceConformanceTest, ActivateMatchesTheReferenceAndWorksInPlace) {
  for (Activation act : {Activation::kNone, Activation::kRelu,
                         Activation::kTanh, Activation::kSigmoid}) {
    SCOPED_TRACE(static_cast<int>(act));
    const auto x = Random(1001, -4, 4);
    std::vector<float> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const double v = x[i];
      want[i] = static_cast<float>(act == Activation::kRelu   ? std::max(v, 0.0)
                                   : act == Activation::kTanh ? std::tanh(v)
                                   : act == Activation::kSigmoid
                                       ? 1 / (1 + std::exp(-v))
                                       : v);
    }
    auto y = Poisoned(x.size());
    ASSERT_OK(device_->Activate(x.size(), act, *On(x), *y));
    ExpectNear(Back(*y), want, 1e-6f);
    auto in_place = On(x);
    ASSERT_OK(device_->Activate(x.size(), act, *in_place, *in_place));
    ExpectNear(Back(*in_place), want, 1e-6f);
  }
}

TEST_P(DeviceConformanceTest, ScaleShiftAndMultiplyMatchTheReference) {
  const auto a = Random(777, 0, 255), b = Random(777);
  std::vector<float> scaled(a.size()), product(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    scaled[i] = static_cast<float>(a[i] * (1.0 / 255) - 0.5);
    product[i] = a[i] * b[i];
  }
  auto y = Poisoned(a.size());
  ASSERT_OK(device_->ScaleShift(a.size(), 1.0f / 255, -0.5f, *On(a), *y));
  ExpectNear(Back(*y), scaled, 1e-6f);
  auto z = Poisoned(a.size());
  ASSERT_OK(device_->Multiply(a.size(), *On(a), *On(b), *z));
  ExpectNear(Back(*z), product, 1e-6f);
}

TEST_P(DeviceConformanceTest, DropoutMasksAreReproducibleAndKeepTheRate) {
  const int64_t n = 200000;
  for (float rate : {0.0f, 0.1f, 0.5f}) {
    SCOPED_TRACE(rate);
    auto mask = Poisoned(n);
    ASSERT_OK(device_->DropoutMask(n, rate, 42, *mask));
    const std::vector<float> got = Back(*mask);
    int64_t dropped = 0;
    for (int64_t i = 0; i < n; ++i) {
      // Bit-identical to the shared draw, so every backend agrees.
      ASSERT_EQ(got[i], DropoutScale(42, i, rate)) << "element " << i;
      ASSERT_TRUE(got[i] == 0.0f || got[i] == 1.0f / (1.0f - rate));
      dropped += got[i] == 0.0f;
    }
    EXPECT_NEAR(static_cast<double>(dropped) / n, rate, 0.005);
    auto other = Poisoned(n);
    ASSERT_OK(device_->DropoutMask(n, rate, 43, *other));
    if (rate > 0) {
      EXPECT_NE(Back(*other), got) << "seeds 42 and 43 agree";
    }
  }
}

TEST_P(DeviceConformanceTest, DropoutRejectsRatesOutsideZeroToOne) {
  auto mask = Poisoned(10);
  for (float rate : {-0.1f, 1.0f, std::nanf("")}) {
    EXPECT_THAT(device_->DropoutMask(10, rate, 1, *mask),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("must be in [0, 1)")));
  }
}

TEST_P(DeviceConformanceTest, Im2ColAndCol2ImMatchTheReference) {
  for (const WindowGeometry& g : Geometries()) {
    SCOPED_TRACE(Describe(g));
    const auto x = Random(g.input_size());
    auto cols = Poisoned(g.patch_rows() * g.patch_cols());
    ASSERT_OK(device_->Im2Col(g, *On(x), *cols));
    ExpectNear(Back(*cols), ReferenceIm2Col(g, x), 0);

    const auto dcols = Random(g.patch_rows() * g.patch_cols());
    auto dx = Poisoned(g.input_size());
    ASSERT_OK(device_->Col2Im(g, *On(dcols), *dx));
    ExpectNear(Back(*dx), ReferenceCol2Im(g, dcols), 1e-5f);
  }
}

struct ConvReference {
  std::vector<float> y, dkernel, dx;
};

// y = cols(x) kernel, dkernel = cols(x)^T dy, dx = col2im(dy kernel^T), in
// double, straight from the window's definition.
ConvReference ReferenceConv(const WindowGeometry& g, int64_t filters,
                            const std::vector<float>& x,
                            const std::vector<float>& kernel,
                            const std::vector<float>& dy) {
  std::vector<double> y(g.patch_rows() * filters, 0.0);
  std::vector<double> dkernel(g.patch_cols() * filters, 0.0);
  std::vector<double> dx(g.input_size(), 0.0);
  ForEachWindowElement(g, [&](int64_t row, int64_t col, int64_t, int64_t in) {
    if (in < 0) return;
    for (int64_t f = 0; f < filters; ++f) {
      y[row * filters + f] += double{x[in]} * kernel[col * filters + f];
      dkernel[col * filters + f] += double{x[in]} * dy[row * filters + f];
      dx[in] += double{dy[row * filters + f]} * kernel[col * filters + f];
    }
  });
  return {std::vector<float>(y.begin(), y.end()),
          std::vector<float>(dkernel.begin(), dkernel.end()),
          std::vector<float>(dx.begin(), dx.end())};
}

TEST_P(DeviceConformanceTest,
       ConvolutionMatchesTheReferenceForwardAndBackward) {
  std::vector<WindowGeometry> geometries = Geometries();
  // Batches whose patches are large enough that a backend working a few
  // images at a time (the CPU's, above 512k floats of patches, 128k per
  // group) takes one image per group, four per group with a partial last
  // one, and more groups than it has kernel-gradient partials; and one
  // just below that, done whole.
  geometries.push_back(Window(20, 24, 24, 16, 5, 1, true));
  geometries.push_back(Window(17, 16, 16, 8, 4, 1, true));
  geometries.push_back(Window(5, 28, 28, 12, 6, 2, false));
  for (const WindowGeometry& g : geometries) {
    for (int64_t filters : {1, 5}) {
      SCOPED_TRACE(absl::StrCat(Describe(g), ", ", filters, " filters"));
      const int64_t k = g.patch_cols(), rows = g.patch_rows();
      const auto x = Random(g.input_size());
      const auto kernel = Random(k * filters);
      const auto dy = Random(rows * filters);
      const ConvReference want = ReferenceConv(g, filters, x, kernel, dy);
      auto dev_x = On(x), dev_kernel = On(kernel);
      // The scratch a layer allocates for a larger largest batch
      // (Device::ConvScratchFloats), which must serve this one too.
      WindowGeometry largest = g;
      largest.n = 3 * g.n;
      const int64_t scratch = device_->ConvScratchFloats(largest);
      ASSERT_GE(scratch, std::min(device_->ConvScratchFloats(g), rows * k));
      auto cols = Poisoned(scratch), dcols = Poisoned(scratch);
      auto y = Poisoned(rows * filters);
      ASSERT_OK(
          device_->ConvForward(g, filters, *dev_x, *dev_kernel, *cols, *y));
      // Sums of up to k (forward, dx) or rows (dkernel) products of values
      // in [-1, 1]: a bound per term (looser on a backend whose products
      // round more, as its gemm tolerance says).
      const float per_term = std::max(2e-6f, GetParam().gemm_tolerance / 100);
      ExpectNear(Back(*y), want.y, per_term * k);
      auto dkernel = Poisoned(k * filters), dx = Poisoned(g.input_size());
      ASSERT_OK(device_->ConvBackward(g, filters, *dev_x, *On(dy), *dev_kernel,
                                      *cols, *dcols, *dkernel, dx.get()));
      ExpectNear(Back(*dkernel), want.dkernel, per_term * rows);
      ExpectNear(Back(*dx), want.dx, per_term * k);
      // Without dx (a model's first layer): the same kernel gradient.
      auto dkernel_only = Poisoned(k * filters);
      ASSERT_OK(device_->ConvBackward(g, filters, *dev_x, *On(dy), *dev_kernel,
                                      *cols, *dcols, *dkernel_only, nullptr));
      ExpectNear(Back(*dkernel_only), Back(*dkernel), 0);
    }
  }
}

// A batch small enough that every backend takes it whole needs its whole
// patch matrix as scratch: one float less is an error, not a write past
// the array.
TEST_P(DeviceConformanceTest, ConvolutionRejectsScratchTooSmall) {
  const WindowGeometry g = Window(2, 8, 8, 3, 3, 1, true);
  const int64_t filters = 4, k = g.patch_cols(), rows = g.patch_rows();
  ASSERT_EQ(device_->ConvScratchFloats(g), rows * k);
  auto x = Poisoned(g.input_size()), kernel = Poisoned(k * filters);
  auto cols = Poisoned(rows * k), dcols = Poisoned(rows * k);
  auto short_cols = Poisoned(rows * k - 1),
       short_dcols = Poisoned(rows * k - 1);
  auto y = Poisoned(rows * filters), dkernel = Poisoned(k * filters);
  auto dx = Poisoned(g.input_size());
  EXPECT_THAT(device_->ConvForward(g, filters, *x, *kernel, *short_cols, *y),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(device_->ConvBackward(g, filters, *x, *y, *kernel, *short_cols,
                                    *dcols, *dkernel, dx.get()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(device_->ConvBackward(g, filters, *x, *y, *kernel, *cols,
                                    *short_dcols, *dkernel, dx.get()),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_P(DeviceConformanceTest, ConvolutionRejectsArraysTooSmall) {
  const WindowGeometry g = Window(2, 8, 8, 3, 3, 1, true);
  const int64_t filters = 4, k = g.patch_cols(), rows = g.patch_rows();
  auto x = Poisoned(g.input_size()), kernel = Poisoned(k * filters);
  auto cols = Poisoned(rows * k), dcols = Poisoned(rows * k);
  auto y = Poisoned(rows * filters), dkernel = Poisoned(k * filters);
  auto short_kernel = Poisoned(k * filters - 1);
  auto short_y = Poisoned(rows * filters - 1);
  auto short_x = Poisoned(g.input_size() - 1);
  EXPECT_THAT(device_->ConvForward(g, filters, *x, *short_kernel, *cols, *y),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(device_->ConvForward(g, filters, *x, *kernel, *cols, *short_y),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(device_->ConvForward(g, filters, *short_x, *kernel, *cols, *y),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("input")));
  EXPECT_THAT(device_->ConvBackward(g, filters, *x, *y, *kernel, *cols, *dcols,
                                    *short_kernel, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(device_->ConvBackward(g, filters, *x, *y, *kernel, *cols, *dcols,
                                    *dkernel, short_x.get()),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_P(DeviceConformanceTest, PoolingMatchesTheReferenceForwardAndBackward) {
  for (PoolKind kind : {PoolKind::kMax, PoolKind::kAverage}) {
    for (const WindowGeometry& g : Geometries()) {
      SCOPED_TRACE(absl::StrCat(kind == PoolKind::kMax ? "max " : "average ",
                                Describe(g)));
      const auto x = Random(g.input_size());
      const auto dy = Random(g.output_size(g.c));
      const PoolReference want = ReferencePool(kind, g, x, dy);
      auto dev_x = On(x);
      auto y = Poisoned(g.output_size(g.c));
      ASSERT_OK(device_->Pool(kind, g, *dev_x, *y));
      ExpectNear(Back(*y), want.y, 1e-6f);
      auto dx = Poisoned(g.input_size());
      ASSERT_OK(device_->PoolBackward(kind, g, *dev_x, *y, *On(dy), *dx));
      ExpectNear(Back(*dx), want.dx, 1e-5f);
    }
  }
}

TEST_P(DeviceConformanceTest, MaxPoolRoutesTiesToTheFirstElement) {
  // One 2x2 window of equal values: only the top-left one gets the
  // gradient, on every backend.
  WindowGeometry g = Window(1, 2, 2, 1, 2, 2, false);
  auto x = On({3, 3, 3, 3});
  auto y = Poisoned(1), dx = Poisoned(4);
  ASSERT_OK(device_->Pool(PoolKind::kMax, g, *x, *y));
  ASSERT_OK(device_->PoolBackward(PoolKind::kMax, g, *x, *y, *On({5}), *dx));
  ExpectNear(Back(*dx), {5, 0, 0, 0}, 0);
}

TEST_P(DeviceConformanceTest, WindowOpsRejectInconsistentGeometry) {
  auto big = Poisoned(10000);
  WindowGeometry pad_too_large = Window(1, 6, 6, 1, 3, 1, false);
  pad_too_large.pad_top = 3;
  WindowGeometry past_the_input = Window(1, 6, 6, 1, 3, 1, false);
  past_the_input.oh = 9;
  WindowGeometry zero_stride = Window(1, 6, 6, 1, 3, 1, false);
  zero_stride.sw = 0;
  for (const WindowGeometry& g : {pad_too_large, past_the_input, zero_stride}) {
    EXPECT_THAT(device_->Im2Col(g, *big, *big),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(device_->Pool(PoolKind::kMax, g, *big, *big),
                StatusIs(absl::StatusCode::kInvalidArgument));
  }
  const WindowGeometry g = Window(2, 8, 8, 3, 3, 1, true);
  auto small = Poisoned(g.input_size() - 1);
  EXPECT_THAT(device_->Im2Col(g, *small, *big),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("input")));
  EXPECT_THAT(device_->Col2Im(g, *big, *small),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

struct Moments {
  std::vector<double> mean, var;
};

Moments ReferenceMoments(int64_t rows, int64_t channels,
                         const std::vector<float>& x) {
  Moments m{std::vector<double>(channels, 0), std::vector<double>(channels, 0)};
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < channels; ++c) m.mean[c] += x[r * channels + c];
  }
  for (double& v : m.mean) v /= rows;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < channels; ++c) {
      const double d = x[r * channels + c] - m.mean[c];
      m.var[c] += d * d;
    }
  }
  for (double& v : m.var) v /= rows;
  return m;
}

std::vector<float> AsFloats(const std::vector<double>& v) {
  return std::vector<float>(v.begin(), v.end());
}

TEST_P(DeviceConformanceTest, ChannelMomentsAreAccurateFarFromZero) {
  // 50,176 rows (a batch of 64 28x28 images) around 1000: a naive
  // E[x^2] - E[x]^2 in float loses every digit of the variance.
  const int64_t rows = 64 * 28 * 28, channels = 12;
  auto x = Random(rows * channels);
  for (float& v : x) v = 1000 + v;
  const Moments want = ReferenceMoments(rows, channels, x);
  auto mean = Poisoned(channels), var = Poisoned(channels);
  ASSERT_OK(device_->ChannelMoments(rows, channels, *On(x), *mean, *var));
  ExpectNear(Back(*mean), AsFloats(want.mean), 1e-5f);
  ExpectNear(Back(*var), AsFloats(want.var), 1e-3f);
}

TEST_P(DeviceConformanceTest, BatchNormApplyMatchesTheReference) {
  const int64_t rows = 300, channels = 7;
  const float epsilon = 1e-3f;
  const auto x = Random(rows * channels, -3, 3);
  const auto mean = Random(channels), gamma = Random(channels),
             beta = Random(channels);
  const auto var = Random(channels, 0.1f, 2.0f);
  for (bool with_gamma : {false, true}) {
    for (bool with_beta : {false, true}) {
      SCOPED_TRACE(testing::Message()
                   << "gamma " << with_gamma << " beta " << with_beta);
      std::vector<float> want(x.size());
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < channels; ++c) {
          const double x_hat = (x[r * channels + c] - double(mean[c])) /
                               std::sqrt(var[c] + double(epsilon));
          want[r * channels + c] =
              static_cast<float>((with_gamma ? gamma[c] : 1.0) * x_hat +
                                 (with_beta ? beta[c] : 0.0));
        }
      }
      auto dev_gamma = On(gamma), dev_beta = On(beta);
      auto y = On(x);  // in place
      ASSERT_OK(device_->BatchNormApply(
          rows, channels, *y, *On(mean), *On(var), epsilon,
          with_gamma ? dev_gamma.get() : nullptr,
          with_beta ? dev_beta.get() : nullptr, *y));
      ExpectNear(Back(*y), want, 1e-5f);
    }
  }
}

TEST_P(DeviceConformanceTest, BatchNormBackwardMatchesTheReference) {
  const int64_t rows = 500, channels = 6;
  const float epsilon = 1e-3f;
  const auto x = Random(rows * channels, -2, 2);
  const auto dy = Random(rows * channels);
  const auto gamma = Random(channels, 0.5f, 1.5f);
  const Moments m = ReferenceMoments(rows, channels, x);
  // dx = gamma / sigma * (dy - mean(dy) - x_hat * mean(dy * x_hat)).
  std::vector<double> sum_dy(channels, 0), sum_dy_xhat(channels, 0);
  auto x_hat = [&](int64_t r, int64_t c) {
    return (x[r * channels + c] - m.mean[c]) / std::sqrt(m.var[c] + epsilon);
  };
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < channels; ++c) {
      sum_dy[c] += dy[r * channels + c];
      sum_dy_xhat[c] += dy[r * channels + c] * x_hat(r, c);
    }
  }
  for (bool with_gamma : {false, true}) {
    SCOPED_TRACE(with_gamma);
    std::vector<float> want(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < channels; ++c) {
        const double k =
            (with_gamma ? gamma[c] : 1.0) / std::sqrt(m.var[c] + epsilon);
        want[r * channels + c] =
            static_cast<float>(k * (dy[r * channels + c] - sum_dy[c] / rows -
                                    x_hat(r, c) * sum_dy_xhat[c] / rows));
      }
    }
    auto dev_gamma = On(gamma);
    auto grad = On(dy);  // dx written over dy
    auto dgamma = Poisoned(channels), dbeta = Poisoned(channels);
    ASSERT_OK(device_->BatchNormBackward(
        rows, channels, *On(x), *On(AsFloats(m.mean)), *On(AsFloats(m.var)),
        epsilon, with_gamma ? dev_gamma.get() : nullptr, *grad, *grad,
        dgamma.get(), dbeta.get()));
    ExpectNear(Back(*grad), want, 1e-4f);
    ExpectNear(Back(*dgamma), AsFloats(sum_dy_xhat), 1e-4f);
    ExpectNear(Back(*dbeta), AsFloats(sum_dy), 1e-4f);
  }
}

TEST_P(DeviceConformanceTest, ChannelOpsRejectArraysThatAreTooSmall) {
  auto x = Poisoned(100), one = Poisoned(1), ten = Poisoned(10);
  EXPECT_THAT(
      device_->ChannelMoments(10, 10, *x, *one, *ten),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("per-channel")));
  EXPECT_THAT(device_->BatchNormApply(11, 10, *x, *ten, *ten, 1e-3f, nullptr,
                                      nullptr, *x),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("data")));
  EXPECT_THAT(device_->Multiply(101, *x, *x, *x),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace psflow
