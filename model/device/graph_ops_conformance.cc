// The conformance suite's graph ops (Axpy, CopyBlock, BatchedGemm): each
// against a plain reference written here (double accumulation, no code
// shared with any backend) on fresh random inputs, outputs NaN-poisoned
// where the op must write them. Part of DeviceConformanceTest, so every
// backend runs it.
#include <string>
#include <vector>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "model/device/device_conformance.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

TEST_P(DeviceConformanceTest, AxpyAddsAScaledVector) {
  const auto x = Random(1001), y = Random(1001);
  std::vector<float> want(y.size());
  for (size_t i = 0; i < y.size(); ++i) {
    want[i] = static_cast<float>(y[i] + -0.75 * x[i]);
  }
  auto out = On(y);
  ASSERT_OK(device_->Axpy(y.size(), -0.75f, *On(x), *out));
  ExpectNear(Back(*out), want, 1e-6f);
}

// A block taken from one place of a wider matrix to another, copied over
// what is there or added to it; values outside the block stay as they were.
TEST_P(DeviceConformanceTest, CopyBlockMovesAndAddsExactlyTheBlock) {
  const int64_t rows = 37, cols = 5, src_stride = 11, dst_stride = 9;
  const int64_t src_offset = 3, dst_offset = 2;
  const auto src = Random(src_offset + rows * src_stride);
  const auto dst = Random(dst_offset + rows * dst_stride + 4);
  for (bool accumulate : {false, true}) {
    std::vector<float> want = dst;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < cols; ++j) {
        float& out = want[dst_offset + r * dst_stride + j];
        const float in = src[src_offset + r * src_stride + j];
        out = accumulate ? out + in : in;
      }
    }
    auto out = On(dst);
    ASSERT_OK(device_->CopyBlock(rows, cols, *On(src), src_offset, src_stride,
                                 *out, dst_offset, dst_stride, accumulate));
    ExpectNear(Back(*out), want, 1e-6f);
  }
}

TEST_P(DeviceConformanceTest, CopyBlockRejectsBlocksOutsideTheArrays) {
  auto small = On(Random(20));
  auto large = On(Random(100));
  EXPECT_THAT(
      device_->CopyBlock(5, 4, *large, 0, 4, *small, 0, 5, false),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("destination")));
  EXPECT_THAT(device_->CopyBlock(2, 4, *large, 0, 3, *large, 50, 4, false),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("stride 3 is below the block's 4 columns")));
}

// Every transpose combination, a shared operand (stride 0) and beta.
TEST_P(DeviceConformanceTest, BatchedGemmMatchesTheReference) {
  const int64_t m = 7, n = 5, k = 6, batch = 9;
  for (bool trans_a : {false, true}) {
    for (bool trans_b : {false, true}) {
      for (int64_t stride_b : {int64_t{0}, k * n + 3}) {
        const int64_t stride_a = m * k + 1, stride_c = m * n + 2;
        const auto a = Random(batch * stride_a);
        const auto b = Random(stride_b == 0 ? k * n : batch * stride_b);
        const auto c = Random(batch * stride_c);
        std::vector<float> want = c;
        for (int64_t i = 0; i < batch; ++i) {
          const float* ai = a.data() + i * stride_a;
          const float* bi = b.data() + i * stride_b;
          for (int64_t r = 0; r < m; ++r) {
            for (int64_t col = 0; col < n; ++col) {
              double sum = 0;
              for (int64_t e = 0; e < k; ++e) {
                const float av = trans_a ? ai[e * m + r] : ai[r * k + e];
                const float bv = trans_b ? bi[col * k + e] : bi[e * n + col];
                sum += static_cast<double>(av) * bv;
              }
              float& out = want[i * stride_c + r * n + col];
              out = static_cast<float>(0.5 * sum + 0.25 * out);
            }
          }
        }
        auto out = On(c);
        ASSERT_OK(device_->BatchedGemm(trans_a, trans_b, m, n, k, 0.5f, *On(a),
                                       stride_a, *On(b), stride_b, 0.25f, *out,
                                       stride_c, batch));
        ExpectNear(Back(*out), want, GetParam().gemm_tolerance);
      }
    }
  }
}

TEST_P(DeviceConformanceTest, BatchedGemmRejectsOverlappingOutputs) {
  auto a = On(Random(64));
  EXPECT_THAT(
      device_->BatchedGemm(false, false, 2, 2, 2, 1, *a, 4, *a, 4, 0, *a, 3, 4),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("overwrite each other")));
}

}  // namespace
}  // namespace psflow
