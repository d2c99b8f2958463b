#include "data/zipf_sampler.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace psflow {
namespace {

// Draws `draws` ranks and compares every rank's frequency with
// k^-exponent / sum: within 5 standard deviations of a binomial count.
void ExpectZipf(int64_t n, double exponent, int draws) {
  ZipfSampler sampler(n, exponent);
  std::vector<int64_t> counts(n + 1, 0);
  uint64_t state = 42;
  for (int i = 0; i < draws; ++i) {
    const int64_t k = sampler.Sample(state);
    ASSERT_GE(k, 1);
    ASSERT_LE(k, n);
    ++counts[k];
  }
  double sum = 0;
  for (int64_t k = 1; k <= n; ++k) sum += std::pow(k, -exponent);
  for (int64_t k = 1; k <= n; ++k) {
    const double p = std::pow(k, -exponent) / sum;
    const double sd = std::sqrt(draws * p * (1 - p));
    EXPECT_NEAR(counts[k], draws * p, 5 * sd + 1)
        << "rank " << k << " of " << n << ", exponent " << exponent;
  }
}

TEST(ZipfSamplerTest, FrequenciesFollowThePowerLaw) {
  ExpectZipf(10, 1.1, 200000);
  ExpectZipf(50, 1.05, 200000);
  ExpectZipf(30, 0.5, 200000);
  ExpectZipf(20, 2.0, 200000);
}

TEST(ZipfSamplerTest, ExponentOneIsHandled) {
  // log1p(t)/t and expm1(t)/t at t = 0 (exponent 1) use their series.
  ExpectZipf(25, 1.0, 200000);
}

TEST(ZipfSamplerTest, OneValueAlwaysGivesRankOne) {
  ZipfSampler sampler(1, 1.2);
  uint64_t state = 1;
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(sampler.Sample(state), 1);
}

TEST(ZipfSamplerTest, HugeRangesStayInRangeAndSkewed) {
  ZipfSampler sampler(int64_t{1} << 40, 1.1);
  uint64_t state = 3;
  int64_t ones = 0;
  for (int i = 0; i < 100000; ++i) {
    const int64_t k = sampler.Sample(state);
    ASSERT_GE(k, 1);
    ASSERT_LE(k, int64_t{1} << 40);
    ones += k == 1;
  }
  // P(1) = 1 / zeta(1.1) ~ 0.0945 for an unbounded range (and ~0.11 here).
  EXPECT_GT(ones, 8000);
  EXPECT_LT(ones, 13000);
}

TEST(ZipfSamplerTest, TheSameStateGivesTheSameRanks) {
  ZipfSampler sampler(1000, 1.1);
  uint64_t a = 9, b = 9;
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sampler.Sample(a), sampler.Sample(b));
}

}  // namespace
}  // namespace psflow
