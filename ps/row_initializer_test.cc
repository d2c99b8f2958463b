#include "ps/row_initializer.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace psflow {
namespace {

std::vector<float> Row(const RowInitializer& init, int64_t id, int dim) {
  std::vector<float> row(dim);
  init.Fill(id, absl::MakeSpan(row));
  return row;
}

TEST(RowInitializerTest, DependsOnlyOnSeedAndId) {
  RowInitializer init;
  init.seed = 7;
  EXPECT_EQ(Row(init, 12345, 16), Row(init, 12345, 16));
  EXPECT_NE(Row(init, 12345, 16), Row(init, 12346, 16));
  RowInitializer other = init;
  other.seed = 8;
  EXPECT_NE(Row(init, 12345, 16), Row(other, 12345, 16));
  // A longer row starts with the shorter one (one stream per id).
  std::vector<float> longer = Row(init, 5, 32);
  longer.resize(16);
  EXPECT_EQ(longer, Row(init, 5, 16));
}

TEST(RowInitializerTest, KindsHaveTheirRanges) {
  RowInitializer zeros{RowInitializer::Kind::kZeros, 1.0f, 1};
  for (float v : Row(zeros, 3, 8)) EXPECT_EQ(v, 0.0f);
  RowInitializer uniform{RowInitializer::Kind::kUniform, 0.05f, 1};
  RowInitializer normal{RowInitializer::Kind::kTruncatedNormal, 0.25f, 1};
  double sum = 0, sum_sq = 0;
  int n = 0;
  for (int64_t id = 0; id < 2000; ++id) {
    for (float v : Row(uniform, id, 8)) {
      EXPECT_GE(v, -0.05f);
      EXPECT_LE(v, 0.05f);
    }
    for (float v : Row(normal, id, 8)) {
      EXPECT_LE(std::fabs(v), 0.5f + 1e-6f);
      sum += v;
      sum_sq += v * v;
      ++n;
    }
  }
  // A normal truncated at 2 sigma has standard deviation 0.88 sigma.
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(sum_sq / n), 0.88 * 0.25, 0.01);
}

}  // namespace
}  // namespace psflow
