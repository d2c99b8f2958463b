// Every device op against a plain C++ reference on fresh random inputs.
// Parameterized over devices: the CUDA backend joins this suite.
#include "worker/device/device.h"

#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/device/cpu/cpu_device.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

struct DeviceCase {
  const char* name;
  std::function<std::unique_ptr<Device>()> create;
};

class DeviceTest : public ::testing::TestWithParam<DeviceCase> {
 protected:
  void SetUp() override { device_ = GetParam().create(); }

  std::vector<float> Random(size_t n, float lo = -1, float hi = 1) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng_);
    return v;
  }

  std::shared_ptr<DeviceArray> On(const std::vector<float>& host) {
    auto array = *device_->Allocate(host.size());
    EXPECT_OK(device_->Upload(host, *array));
    return array;
  }

  // Poisoned so that elements an op forgets to write are caught.
  std::shared_ptr<DeviceArray> Poisoned(size_t n) {
    return On(std::vector<float>(n, std::nanf("")));
  }

  std::vector<float> Back(const DeviceArray& array) {
    std::vector<float> host(array.size());
    EXPECT_OK(device_->Download(array, absl::MakeSpan(host)));
    return host;
  }

  std::unique_ptr<Device> device_;
  std::mt19937 rng_{1234};
};

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want,
                float relative) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << "element " << i << " is NaN";
    ASSERT_NEAR(got[i], want[i], relative * (1 + std::fabs(want[i])))
        << "element " << i;
  }
}

TEST_P(DeviceTest, GemmMatchesTheReferenceForEveryTransposition) {
  const int64_t m = 37, n = 29, k = 53;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      auto a = Random(m * k), b = Random(k * n), c = Random(m * n);
      std::vector<float> want(m * n);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < k; ++p) {
            sum += double(ta ? a[p * m + i] : a[i * k + p]) *
                   double(tb ? b[j * k + p] : b[p * n + j]);
          }
          want[i * n + j] = static_cast<float>(0.5 * sum + 2.0 * c[i * n + j]);
        }
      }
      auto dc = On(c);
      ASSERT_OK(
          device_->Gemm(ta, tb, m, n, k, 0.5f, *On(a), *On(b), 2.0f, *dc));
      SCOPED_TRACE(testing::Message() << "trans_a=" << ta << " trans_b=" << tb);
      ExpectNear(Back(*dc), want, 1e-5f);
    }
  }
}

TEST_P(DeviceTest, GemmRejectsOperandsThatAreTooSmall) {
  auto small = On(std::vector<float>(4));
  EXPECT_THAT(
      device_->Gemm(false, false, 3, 3, 3, 1, *small, *small, 0, *small),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("operand too small")));
}

TEST_P(DeviceTest, BiasActivationMatchesTheReference) {
  const int64_t rows = 7, cols = 13;
  for (Activation act : {Activation::kNone, Activation::kRelu,
                         Activation::kTanh, Activation::kSigmoid}) {
    auto z = Random(rows * cols, -3, 3), bias = Random(cols);
    std::vector<float> want(z.size());
    for (int64_t i = 0; i < rows * cols; ++i) {
      const float x = z[i] + bias[i % cols];
      want[i] = act == Activation::kRelu      ? std::max(x, 0.0f)
                : act == Activation::kTanh    ? std::tanh(x)
                : act == Activation::kSigmoid ? 1 / (1 + std::exp(-x))
                                              : x;
    }
    auto dz = On(z);
    ASSERT_OK(device_->BiasActivation(rows, cols, *On(bias), act, *dz));
    ExpectNear(Back(*dz), want, 1e-6f);
  }
}

TEST_P(DeviceTest, ActivationBackwardMatchesTheReference) {
  const int64_t n = 101;
  for (Activation act : {Activation::kNone, Activation::kRelu,
                         Activation::kTanh, Activation::kSigmoid}) {
    auto out = Random(n, 0.01f, 0.99f), grad = Random(n);
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

TEST_P(DeviceTest, ColumnSumsWriteEveryColumn) {
  const int64_t rows = 9, cols = 17;
  auto x = Random(rows * cols);
  std::vector<float> want(cols, 0.0f);
  for (int64_t i = 0; i < rows * cols; ++i) want[i % cols] += x[i];
  auto sums = Poisoned(cols);
  ASSERT_OK(device_->ColumnSums(rows, cols, *On(x), *sums));
  ExpectNear(Back(*sums), want, 1e-5f);
}

TEST_P(DeviceTest, SoftmaxCrossEntropyMatchesTheReference) {
  const int64_t rows = 11, classes = 7;
  auto logits = Random(rows * classes, -20, 20);  // large: tests stability
  std::vector<float> labels(rows);
  for (int64_t r = 0; r < rows; ++r)
    labels[r] = static_cast<float>(r % classes);
  double loss = 0;
  int correct = 0;
  std::vector<float> want_grad(rows * classes), want_pred(rows);
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = &logits[r * classes];
    int best = 0;
    for (int c = 1; c < classes; ++c) best = z[c] > z[best] ? c : best;
    double sum = 0;
    for (int c = 0; c < classes; ++c) sum += std::exp(double(z[c]) - z[best]);
    const double lse = std::log(sum) + z[best];
    loss += lse - z[int(labels[r])];
    correct += best == int(labels[r]);
    want_pred[r] = best;
    for (int c = 0; c < classes; ++c) {
      want_grad[r * classes + c] = static_cast<float>(
          (std::exp(z[c] - lse) - (c == int(labels[r]))) / rows);
    }
  }
  auto grad = Poisoned(rows * classes), pred = Poisoned(rows),
       stats = Poisoned(2);
  ASSERT_OK(device_->SoftmaxCrossEntropy(
      rows, classes, *On(logits), *On(labels), grad.get(), *pred, *stats));
  ExpectNear(Back(*grad), want_grad, 1e-5f);
  ExpectNear(Back(*pred), want_pred, 0);
  std::vector<float> s = Back(*stats);
  EXPECT_NEAR(s[0], loss, 1e-4 * loss);
  EXPECT_EQ(s[1], correct);
}

TEST_P(DeviceTest, SoftmaxCrossEntropyRejectsLabelsOutsideTheClasses) {
  auto logits = On(Random(2 * 3));
  auto labels = On({1.0f, 3.0f});
  auto pred = Poisoned(2), stats = Poisoned(2);
  EXPECT_THAT(device_->SoftmaxCrossEntropy(2, 3, *logits, *labels, nullptr,
                                           *pred, *stats),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("label 3 of example 1 is outside")));
}

TEST_P(DeviceTest, UploadsLargerThanTheArrayAreRefused) {
  auto array = *device_->Allocate(3);
  EXPECT_THAT(device_->Upload(std::vector<float>(4), *array),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

INSTANTIATE_TEST_SUITE_P(
    Devices, DeviceTest,
    ::testing::Values(DeviceCase{"Cpu", [] { return CreateCpuDevice(1); }}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace psflow
