#include "common/binary_metrics.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "common/splitmix64.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::DoubleNear;
using ::testing::HasSubstr;

// The definition: over every (positive, negative) pair, 1 when the
// positive scores higher, 1/2 on a tie.
double BruteForceAuc(const std::vector<float>& scores,
                     const std::vector<uint8_t>& labels) {
  double wins = 0, pairs = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    for (size_t j = 0; j < scores.size(); ++j) {
      if (labels[i] != 1 || labels[j] != 0) continue;
      pairs += 1;
      wins += scores[i] > scores[j] ? 1 : scores[i] == scores[j] ? 0.5 : 0;
    }
  }
  return wins / pairs;
}

double Uniform(uint64_t& state) {
  return static_cast<double>(SplitMix64(state) >> 11) * 0x1.0p-53;
}

TEST(AreaUnderRocTest, MatchesAHandComputedExample) {
  // Pairs (pos, neg): 0.35>0.1, 0.35<0.4, 0.8>0.1, 0.8>0.4: 3 of 4.
  EXPECT_THAT(AreaUnderRoc({0.1f, 0.4f, 0.35f, 0.8f}, {0, 0, 1, 1}),
              IsOkAndHolds(0.75));
}

TEST(AreaUnderRocTest, TiesCountOneHalf) {
  // Positives 0.5 and 0.9, negatives 0.2 and 0.5: 1 + 0.5 + 1 + 1 of 4.
  EXPECT_THAT(AreaUnderRoc({0.2f, 0.5f, 0.5f, 0.9f}, {0, 1, 0, 1}),
              IsOkAndHolds(0.875));
  EXPECT_THAT(AreaUnderRoc({0.5f, 0.5f, 0.5f}, {0, 1, 1}), IsOkAndHolds(0.5));
}

TEST(AreaUnderRocTest, PerfectRankingIsOneAndInvertedIsZero) {
  EXPECT_THAT(AreaUnderRoc({0.1f, 0.2f, 0.8f, 0.9f}, {0, 0, 1, 1}),
              IsOkAndHolds(1.0));
  EXPECT_THAT(AreaUnderRoc({0.1f, 0.2f, 0.8f, 0.9f}, {1, 1, 0, 0}),
              IsOkAndHolds(0.0));
}

TEST(AreaUnderRocTest, RandomScoresGiveAboutOneHalf) {
  uint64_t state = 7;
  std::vector<float> scores(100000);
  std::vector<uint8_t> labels(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) {
    scores[i] = static_cast<float>(Uniform(state));
    labels[i] = Uniform(state) < 0.3;
  }
  // Its standard deviation here is about 0.002.
  EXPECT_THAT(AreaUnderRoc(scores, labels),
              IsOkAndHolds(DoubleNear(0.5, 0.01)));
}

TEST(AreaUnderRocTest, EqualsThePairwiseDefinitionWithManyTies) {
  uint64_t state = 11;
  std::vector<float> scores(600);
  std::vector<uint8_t> labels(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) {
    // 8 distinct scores, correlated with the label: many ties, AUC > 0.5.
    labels[i] = Uniform(state) < 0.4;
    scores[i] = std::floor(8 * (0.6 * Uniform(state) + 0.4 * labels[i])) / 8;
  }
  ASSERT_OK_AND_ASSIGN(double auc, AreaUnderRoc(scores, labels));
  EXPECT_NEAR(auc, BruteForceAuc(scores, labels), 1e-12);
  EXPECT_GT(auc, 0.6);
}

TEST(AreaUnderRocTest, OneClassOnlyIsUndefined) {
  EXPECT_THAT(AreaUnderRoc({0.1f, 0.2f}, {1, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the AUC is undefined: all 2 examples are "
                                 "positive")));
  EXPECT_THAT(AreaUnderRoc({}, {}), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("undefined")));
}

TEST(AreaUnderRocTest, BadInputIsNamed) {
  EXPECT_THAT(AreaUnderRoc({0.1f, 0.2f}, {0}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("2 scores but 1 labels")));
  EXPECT_THAT(AreaUnderRoc({0.1f, 0.2f}, {0, 2}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("label 1 is 2; a binary label is 0 or 1")));
  EXPECT_THAT(AreaUnderRoc({0.1f, std::nanf("")}, {0, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("example 1 has a NaN score")));
}

TEST(LogLossTest, MatchesHandComputedValues) {
  EXPECT_DOUBLE_EQ(LogLoss({0.5f, 0.5f}, {0, 1}), std::log(2.0));
  EXPECT_NEAR(LogLoss({0.9f, 0.2f}, {1, 0}),
              -(std::log(0.9) + std::log(0.8)) / 2, 1e-7);
}

TEST(LogLossTest, ClipsCertainMistakes) {
  const double most = -std::log(kLogLossEpsilon);  // about 16.12
  EXPECT_NEAR(LogLoss({0.0f}, {1}), most, 1e-6);
  EXPECT_NEAR(LogLoss({1.0f}, {0}), most, 1e-6);
  EXPECT_NEAR(LogLoss({1.0f, 0.0f}, {1, 0}), -std::log1p(-kLogLossEpsilon),
              1e-12);
}

TEST(LogLossTest, IsNaNWhenUndefined) {
  EXPECT_TRUE(std::isnan(LogLoss({}, {})));
  EXPECT_TRUE(std::isnan(LogLoss({0.5f}, {0, 1})));
  EXPECT_TRUE(std::isnan(LogLoss({0.5f, std::nanf("")}, {0, 1})));
}

TEST(BinaryMetricsTest, BatchesScoreLikeOneSet) {
  const std::vector<float> p = {0.1f, 0.4f, 0.35f, 0.8f, 0.6f};
  const std::vector<uint8_t> y = {0, 0, 1, 1, 0};
  BinaryMetrics metrics;
  ASSERT_OK(metrics.Add(absl::MakeConstSpan(p).subspan(0, 2),
                        absl::MakeConstSpan(y).subspan(0, 2)));
  ASSERT_OK(metrics.Add(absl::MakeConstSpan(p).subspan(2),
                        absl::MakeConstSpan(y).subspan(2)));
  EXPECT_EQ(metrics.count(), 5);
  EXPECT_EQ(metrics.positives(), 2);
  EXPECT_DOUBLE_EQ(metrics.PositiveRate(), 0.4);
  ASSERT_OK_AND_ASSIGN(double auc, metrics.Auc());
  EXPECT_DOUBLE_EQ(auc, *AreaUnderRoc(p, y));
  EXPECT_NEAR(metrics.LogLoss(), LogLoss(p, y), 1e-12);
}

TEST(BinaryMetricsTest, RejectsABadBatchWithoutAddingIt) {
  BinaryMetrics metrics;
  EXPECT_THAT(metrics.Add({0.5f, 0.5f}, {1, 3}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(metrics.count(), 0);
  EXPECT_TRUE(std::isnan(metrics.LogLoss()));
  EXPECT_THAT(metrics.Auc(), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace psflow
