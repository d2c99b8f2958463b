#include "model/device/device_conformance.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "common/status_matchers.h"
#include "gmock/gmock.h"

namespace psflow {

using ::testing::HasSubstr;

std::string DeviceCaseName(const ::testing::TestParamInfo<DeviceCase>& info) {
  return info.param.name;
}

void DeviceConformanceTest::SetUp() {
  absl::StatusOr<std::unique_ptr<Device>> device = GetParam().create();
  PSFLOW_SKIP_IF_ABSENT(device.status());
  ASSERT_OK(device.status());
  device_ = *std::move(device);
}

std::vector<float> DeviceConformanceTest::Random(size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng_);
  return v;
}

std::shared_ptr<DeviceArray> DeviceConformanceTest::On(
    const std::vector<float>& host) {
  auto array = device_->Allocate(host.size());
  EXPECT_OK(array.status());
  if (!array.ok()) return nullptr;
  EXPECT_OK(device_->Upload(host, **array));
  return *array;
}

std::shared_ptr<DeviceArray> DeviceConformanceTest::Poisoned(size_t n) {
  return On(std::vector<float>(n, std::nanf("")));
}

std::vector<float> DeviceConformanceTest::Back(const DeviceArray& array) {
  std::vector<float> host(array.size());
  EXPECT_OK(device_->Download(array, absl::MakeSpan(host)));
  return host;
}

namespace {

// C = alpha * op(A) op(B) + beta * C, accumulated in double.
std::vector<float> ReferenceGemm(bool ta, bool tb, int64_t m, int64_t n,
                                 int64_t k, float alpha,
                                 const std::vector<float>& a,
                                 const std::vector<float>& b, float beta,
                                 const std::vector<float>& c) {
  std::vector<float> out(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        sum += double(ta ? a[p * m + i] : a[i * k + p]) *
               double(tb ? b[j * k + p] : b[p * n + j]);
      }
      const double prior = beta == 0 ? 0.0 : double(beta) * c[i * n + j];
      out[i * n + j] = static_cast<float>(alpha * sum + prior);
    }
  }
  return out;
}

float ReferenceActivation(Activation act, float x) {
  switch (act) {
    case Activation::kRelu:
      return std::max(x, 0.0f);
    case Activation::kTanh:
      return static_cast<float>(std::tanh(double(x)));
    case Activation::kSigmoid:
      return static_cast<float>(1 / (1 + std::exp(-double(x))));
    case Activation::kNone:
      break;
  }
  return x;
}

constexpr Activation kActivations[] = {Activation::kNone, Activation::kRelu,
                                       Activation::kTanh, Activation::kSigmoid};

// Gemm: relative error GetParam().gemm_tolerance (1e-5 for float32: k <= 784
// products of values in [-1, 1], float accumulation in any order).
TEST_P(DeviceConformanceTest, GemmMatchesTheReferenceForEveryTransposition) {
  struct Shape {
    int64_t m, n, k;
  };
  for (Shape s : {Shape{37, 29, 53}, Shape{1, 1, 1}, Shape{64, 256, 784}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        SCOPED_TRACE(testing::Message()
                     << s.m << "x" << s.n << "x" << s.k << " trans_a=" << ta
                     << " trans_b=" << tb);
        auto a = Random(s.m * s.k), b = Random(s.k * s.n),
             c = Random(s.m * s.n);
        const auto want =
            ReferenceGemm(ta, tb, s.m, s.n, s.k, 0.5f, a, b, 2.0f, c);
        auto dc = On(c);
        ASSERT_OK(device_->Gemm(ta, tb, s.m, s.n, s.k, 0.5f, *On(a), *On(b),
                                2.0f, *dc));
        ExpectNear(Back(*dc), want, GetParam().gemm_tolerance);
      }
    }
  }
}

TEST_P(DeviceConformanceTest, GemmWithZeroBetaIgnoresWhatCHeld) {
  const int64_t m = 19, n = 23, k = 31;
  auto a = Random(m * k), b = Random(k * n);
  const auto want = ReferenceGemm(false, false, m, n, k, 1.0f, a, b, 0.0f,
                                  std::vector<float>(m * n));
  auto c = Poisoned(m * n);
  ASSERT_OK(
      device_->Gemm(false, false, m, n, k, 1.0f, *On(a), *On(b), 0.0f, *c));
  ExpectNear(Back(*c), want, GetParam().gemm_tolerance);
}

TEST_P(DeviceConformanceTest, GemmWithNoInnerDimensionScalesC) {
  auto c = Random(6);
  std::vector<float> want(c);
  for (float& x : want) x *= 3.0f;
  auto dc = On(c), empty = On({0.0f});
  ASSERT_OK(
      device_->Gemm(false, false, 2, 3, 0, 1.0f, *empty, *empty, 3.0f, *dc));
  ExpectNear(Back(*dc), want, 1e-6f);
}

TEST_P(DeviceConformanceTest, GemmRejectsOperandsThatAreTooSmall) {
  auto small = On(std::vector<float>(4));
  EXPECT_THAT(
      device_->Gemm(false, false, 3, 3, 3, 1, *small, *small, 0, *small),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("operand too small")));
  EXPECT_THAT(
      device_->Gemm(false, false, -1, 1, 1, 1, *small, *small, 0, *small),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("m is -1")));
}

// Bias + activation: 1e-6 relative (one rounding of the sum, the
// activation within a few ulp).
TEST_P(DeviceConformanceTest, BiasActivationMatchesTheReference) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{7, 13}, {64, 300}}) {
    for (Activation act : kActivations) {
      SCOPED_TRACE(testing::Message() << rows << "x" << cols << " activation "
                                      << static_cast<int>(act));
      auto z = Random(rows * cols, -3, 3), bias = Random(cols);
      std::vector<float> want(z.size());
      for (int64_t i = 0; i < rows * cols; ++i) {
        want[i] = ReferenceActivation(act, z[i] + bias[i % cols]);
      }
      // One spare element after the matrix must stay as it was.
      z.push_back(42.0f);
      want.push_back(42.0f);
      auto dz = On(z);
      ASSERT_OK(device_->BiasActivation(rows, cols, *On(bias), act, *dz));
      ExpectNear(Back(*dz), want, 1e-6f);
    }
  }
}

// Activation backward: 1e-6 relative (one or two roundings).
TEST_P(DeviceConformanceTest, ActivationBackwardMatchesTheReference) {
  const int64_t n = 1001;
  for (Activation act : kActivations) {
    SCOPED_TRACE(static_cast<int>(act));
    auto out = Random(n, 0.01f, 0.99f), grad = Random(n);
    if (act == Activation::kRelu) {
      for (int64_t i = 0; i < n; i += 3) out[i] = 0.0f;  // the dead side
    }
    std::vector<float> want(n);
    for (int64_t i = 0; i < n; ++i) {
      const float a = out[i];
      const float d = act == Activation::kRelu      ? (a > 0 ? 1.0f : 0.0f)
                      : act == Activation::kTanh    ? 1 - a * a
                      : act == Activation::kSigmoid ? a * (1 - a)
                                                    : 1.0f;
      want[i] = grad[i] * d;
    }
    auto dg = On(grad);
    ASSERT_OK(device_->ActivationBackward(n, act, *On(out), *dg));
    ExpectNear(Back(*dg), want, 1e-6f);
  }
}

// Column sums: 1e-5 relative (up to 1024 float additions in any order).
TEST_P(DeviceConformanceTest, ColumnSumsWriteEveryColumn) {
  for (auto [rows, cols] :
       {std::pair<int64_t, int64_t>{9, 17}, {1024, 10}, {64, 1000}, {0, 5}}) {
    SCOPED_TRACE(testing::Message() << rows << "x" << cols);
    auto x = Random(rows * cols);
    std::vector<double> sums(cols, 0.0);
    for (int64_t i = 0; i < rows * cols; ++i) sums[i % cols] += x[i];
    std::vector<float> want(sums.begin(), sums.end());
    auto out = Poisoned(cols);
    ASSERT_OK(
        device_->ColumnSums(rows, cols, *On(x.empty() ? Random(1) : x), *out));
    ExpectNear(Back(*out), want, 1e-5f);
  }
}

struct SoftmaxReference {
  double loss = 0;
  int correct = 0;
  std::vector<float> grad, predictions;
};

SoftmaxReference ReferenceSoftmax(int64_t rows, int64_t classes,
                                  const std::vector<float>& logits,
                                  const std::vector<float>& labels) {
  SoftmaxReference ref;
  ref.grad.resize(rows * classes);
  ref.predictions.resize(rows);
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = &logits[r * classes];
    const int label = static_cast<int>(labels[r]);
    int best = 0;
    for (int c = 1; c < classes; ++c) best = z[c] > z[best] ? c : best;
    double sum = 0;
    for (int c = 0; c < classes; ++c) sum += std::exp(double(z[c]) - z[best]);
    const double lse = std::log(sum) + z[best];
    ref.loss += lse - z[label];
    ref.correct += best == label;
    ref.predictions[r] = best;
    for (int c = 0; c < classes; ++c) {
      ref.grad[r * classes + c] =
          static_cast<float>((std::exp(z[c] - lse) - (c == label)) / rows);
    }
  }
  return ref;
}

// Softmax cross-entropy: gradient 1e-5 relative, loss sum 1e-5 relative
// (float exp/log per row, summed), predictions and the correct count exact.
TEST_P(DeviceConformanceTest, SoftmaxCrossEntropyMatchesTheReference) {
  for (auto [rows, classes] :
       {std::pair<int64_t, int64_t>{11, 7}, {300, 10}, {5, 100}, {3, 1000}}) {
    SCOPED_TRACE(testing::Message()
                 << rows << " rows, " << classes << " classes");
    auto logits = Random(rows * classes, -20, 20);  // large: stability
    std::vector<float> labels(rows);
    for (int64_t r = 0; r < rows; ++r) {
      labels[r] = static_cast<float>((r * 7) % classes);
    }
    // Make some rows right so that the count is not trivially zero.
    for (int64_t r = 0; r < rows; r += 2) {
      logits[r * classes + static_cast<int64_t>(labels[r])] = 25.0f;
    }
    const SoftmaxReference want =
        ReferenceSoftmax(rows, classes, logits, labels);
    auto grad = Poisoned(rows * classes), pred = Poisoned(rows),
         stats = Poisoned(2);
    ASSERT_OK(device_->SoftmaxCrossEntropy(
        rows, classes, *On(logits), *On(labels), grad.get(), *pred, *stats));
    ExpectNear(Back(*grad), want.grad, 1e-5f);
    ExpectNear(Back(*pred), want.predictions, 0);
    std::vector<float> s = Back(*stats);
    ASSERT_FALSE(std::isnan(s[0]));
    EXPECT_NEAR(s[0], want.loss, 1e-5 * (1 + want.loss));
    EXPECT_EQ(s[1], want.correct);
  }
}

TEST_P(DeviceConformanceTest, SoftmaxCrossEntropyWithoutGradientLeavesItAlone) {
  const int64_t rows = 4, classes = 3;
  auto logits = Random(rows * classes);
  std::vector<float> labels = {0, 1, 2, 1};
  const SoftmaxReference want = ReferenceSoftmax(rows, classes, logits, labels);
  auto pred = Poisoned(rows), stats = Poisoned(2);
  ASSERT_OK(device_->SoftmaxCrossEntropy(rows, classes, *On(logits),
                                         *On(labels), nullptr, *pred, *stats));
  ExpectNear(Back(*pred), want.predictions, 0);
  std::vector<float> s = Back(*stats);
  EXPECT_NEAR(s[0], want.loss, 1e-5 * (1 + want.loss));
  EXPECT_EQ(s[1], want.correct);
}

TEST_P(DeviceConformanceTest, ArgmaxTiesGoToTheLowestClass) {
  auto pred = Poisoned(2), stats = Poisoned(2);
  ASSERT_OK(device_->SoftmaxCrossEntropy(
      2, 4, *On({1, 3, 3, 0, /*row 1*/ 2, 2, 2, 2}), *On({1, 0}), nullptr,
      *pred, *stats));
  ExpectNear(Back(*pred), {1, 0}, 0);
  EXPECT_EQ(Back(*stats)[1], 2);
}

// The op or (devices that queue work) the next Synchronize reports it.
absl::Status SoftmaxThenSynchronize(Device& device, int64_t rows,
                                    int64_t classes, const DeviceArray& logits,
                                    const DeviceArray& labels,
                                    DeviceArray& pred, DeviceArray& stats) {
  absl::Status status = device.SoftmaxCrossEntropy(
      rows, classes, logits, labels, nullptr, pred, stats);
  if (!status.ok()) return status;
  return device.Synchronize();
}

TEST_P(DeviceConformanceTest,
       SoftmaxCrossEntropyRejectsLabelsOutsideTheClasses) {
  auto logits = On(Random(4 * 3));
  auto pred = Poisoned(4), stats = Poisoned(2);
  EXPECT_THAT(
      SoftmaxThenSynchronize(*device_, 4, 3, *logits,
                             *On({1.0f, 2.0f, 3.0f, -1.0f}), *pred, *stats),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("label 3 of example 2 is outside the model's "
                         "3 classes")));
  EXPECT_THAT(SoftmaxThenSynchronize(*device_, 2, 3, *logits,
                                     *On({0.0f, std::nanf("")}), *pred, *stats),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("of example 1 is outside")));
  // Reported once; the device goes on working.
  EXPECT_OK(SoftmaxThenSynchronize(*device_, 2, 3, *logits, *On({0.0f, 2.9f}),
                                   *pred, *stats));
}

TEST_P(DeviceConformanceTest, EveryOpRejectsArraysThatAreTooSmall) {
  auto a4 = On(std::vector<float>(4)), a12 = On(std::vector<float>(12));
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_THAT(device_->BiasActivation(3, 4, *a4, Activation::kRelu, *a4),
              StatusIs(kInvalid, HasSubstr("z needs 12 values")));
  EXPECT_THAT(device_->BiasActivation(3, 4, *On({1}), Activation::kRelu, *a12),
              StatusIs(kInvalid, HasSubstr("bias needs 4 values")));
  EXPECT_THAT(device_->ActivationBackward(5, Activation::kTanh, *a4, *a12),
              StatusIs(kInvalid, HasSubstr("out needs 5 values")));
  EXPECT_THAT(device_->ColumnSums(3, 4, *a12, *On({1})),
              StatusIs(kInvalid, HasSubstr("sums needs 4 values")));
  EXPECT_THAT(device_->SoftmaxCrossEntropy(3, 4, *a12, *a4, a4.get(), *a4, *a4),
              StatusIs(kInvalid, HasSubstr("grad needs 12 values")));
  EXPECT_THAT(
      device_->SoftmaxCrossEntropy(3, 4, *a12, *On({1}), nullptr, *a4, *a4),
      StatusIs(kInvalid, HasSubstr("labels needs 3 values")));
  EXPECT_THAT(device_->Allocate(-1), StatusIs(kInvalid));
}

TEST_P(DeviceConformanceTest, TransfersLargerThanTheArrayAreRefused) {
  auto array = *device_->Allocate(3);
  std::vector<float> four(4);
  EXPECT_THAT(device_->Upload(four, *array),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("upload of 4 values; the array holds 3")));
  EXPECT_THAT(device_->Download(*array, absl::MakeSpan(four)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(device_->DownloadAsync(*array, absl::MakeSpan(four)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_P(DeviceConformanceTest, AllocatedArraysStartAtZero) {
  ASSERT_OK_AND_ASSIGN(auto array, device_->Allocate(1000));
  ExpectNear(Back(*array), std::vector<float>(1000, 0.0f), 0);
  ASSERT_OK_AND_ASSIGN(auto host, device_->AllocateHost(1000));
  ASSERT_EQ(host->span().size(), 1000u);
  for (float x : host->span()) ASSERT_EQ(x, 0.0f);
}

// Host staging buffers (page-locked on CUDA) round-trip through the device,
// and asynchronous downloads see each array as it was when they were asked
// for, even when later work changes it before they run.
TEST_P(DeviceConformanceTest, TransfersKeepProgramOrder) {
  const int64_t rows = 256, cols = 1024;
  ASSERT_OK_AND_ASSIGN(auto x_host, device_->AllocateHost(rows * cols));
  ASSERT_OK_AND_ASSIGN(auto y_host, device_->AllocateHost(rows * cols));
  ASSERT_OK_AND_ASSIGN(auto before, device_->AllocateHost(rows * cols));
  ASSERT_OK_AND_ASSIGN(auto after, device_->AllocateHost(rows * cols));
  ASSERT_OK_AND_ASSIGN(auto sums_x, device_->AllocateHost(cols));
  ASSERT_OK_AND_ASSIGN(auto sums_y, device_->AllocateHost(cols));
  const std::vector<float> x = Random(rows * cols), y = Random(rows * cols),
                           bias = Random(cols);
  std::copy(x.begin(), x.end(), x_host->span().begin());
  std::copy(y.begin(), y.end(), y_host->span().begin());
  ASSERT_OK_AND_ASSIGN(auto a, device_->Allocate(rows * cols));
  ASSERT_OK_AND_ASSIGN(auto s1, device_->Allocate(cols));
  ASSERT_OK_AND_ASSIGN(auto s2, device_->Allocate(cols));
  auto dbias = On(bias);

  // Upload x, sum it, upload y over it (must wait for the sum), sum again.
  ASSERT_OK(device_->Upload(x_host->span(), *a));
  ASSERT_OK(device_->ColumnSums(rows, cols, *a, *s1));
  ASSERT_OK(device_->Upload(y_host->span(), *a));
  ASSERT_OK(device_->ColumnSums(rows, cols, *a, *s2));
  ASSERT_OK(device_->DownloadAsync(*s1, sums_x->span()));
  ASSERT_OK(device_->DownloadAsync(*s2, sums_y->span()));
  // Download y, change the array, download again: the first copy must
  // still see y.
  ASSERT_OK(device_->DownloadAsync(*a, before->span()));
  ASSERT_OK(device_->BiasActivation(rows, cols, *dbias, Activation::kNone, *a));
  ASSERT_OK(device_->DownloadAsync(*a, after->span()));
  ASSERT_OK(device_->Synchronize());

  std::vector<double> want_x(cols), want_y(cols);
  for (int64_t i = 0; i < rows * cols; ++i) {
    want_x[i % cols] += x[i];
    want_y[i % cols] += y[i];
  }
  auto as_vector = [](HostBuffer& b) {
    return std::vector<float>(b.span().begin(), b.span().end());
  };
  ExpectNear(as_vector(*sums_x),
             std::vector<float>(want_x.begin(), want_x.end()), 1e-5f);
  ExpectNear(as_vector(*sums_y),
             std::vector<float>(want_y.begin(), want_y.end()), 1e-5f);
  ExpectNear(as_vector(*before), y, 0);
  std::vector<float> want_after(y);
  for (int64_t i = 0; i < rows * cols; ++i) want_after[i] += bias[i % cols];
  ExpectNear(as_vector(*after), want_after, 1e-6f);
}

}  // namespace
}  // namespace psflow
