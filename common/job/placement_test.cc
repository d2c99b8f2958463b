#include "common/job/placement.h"

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kNoSplit = int64_t{1} << 60;

TEST(PlacementTest, BalancesBytesNotCounts) {
  // Round-robin in input order would give ps 0 a + b (80 bytes) and ps 1
  // big + mid (7600 bytes); balancing bytes gives 4000 | 3680.
  ASSERT_OK_AND_ASSIGN(
      Placement p,
      PlaceVariables(
          {{"a", {10}}, {"big", {1000}}, {"b", {10}}, {"mid", {900}}}, 2,
          kNoSplit));
  EXPECT_EQ(p.Find("big")->parts[0].ps, 0);
  EXPECT_EQ(p.Find("mid")->parts[0].ps, 1);
  EXPECT_EQ(p.Find("a")->parts[0].ps, 1);
  EXPECT_EQ(p.Find("b")->parts[0].ps, 1);
  EXPECT_THAT(p.bytes_per_ps, ElementsAre(4000, 3680));
}

TEST(PlacementTest, KeepsTheInputOrder) {
  ASSERT_OK_AND_ASSIGN(Placement p,
                       PlaceVariables({{"x", {1}}, {"y", {5}}}, 3, kNoSplit));
  EXPECT_EQ(p.variables[0].name, "x");
  EXPECT_EQ(p.variables[1].name, "y");
}

TEST(PlacementTest, SplitsLargeVariablesByRowsOverAllServers) {
  ASSERT_OK_AND_ASSIGN(Placement p,
                       PlaceVariables({{"emb", {10, 4}}, {"bias", {4}}}, 3,
                                      /*split_threshold_bytes=*/100));
  const PlacedVariable& emb = *p.Find("emb");
  ASSERT_EQ(emb.parts.size(), 3u);
  // 10 rows over 3 servers: 4, 3, 3.
  EXPECT_EQ(emb.parts[0].name, "emb/part_0");
  EXPECT_EQ(emb.parts[0].ps, 0);
  EXPECT_THAT(emb.parts[0].shape, ElementsAre(4, 4));
  EXPECT_EQ(emb.parts[1].row_begin, 4);
  EXPECT_EQ(emb.parts[1].row_end, 7);
  EXPECT_EQ(emb.parts[1].element_offset, 16);
  EXPECT_EQ(emb.parts[1].num_elements, 12);
  EXPECT_EQ(emb.parts[2].ps, 2);
  EXPECT_EQ(emb.parts[2].element_offset, 28);
  // The small bias goes to a least-loaded server (ps 1 or 2 hold 48 bytes).
  EXPECT_EQ(p.Find("bias")->parts.size(), 1u);
  EXPECT_EQ(p.Find("bias")->parts[0].ps, 1);
  EXPECT_EQ(p.Find("bias")->parts[0].name, "bias");
}

TEST(PlacementTest, NeverSplitsIntoMorePartsThanRows) {
  ASSERT_OK_AND_ASSIGN(Placement p, PlaceVariables({{"w", {2, 1000}}}, 4, 1));
  EXPECT_EQ(p.Find("w")->parts.size(), 2u);
}

TEST(PlacementTest, ScalarsArePlacedWhole) {
  ASSERT_OK_AND_ASSIGN(Placement p, PlaceVariables({{"s", {}}}, 2, 1));
  ASSERT_EQ(p.Find("s")->parts.size(), 1u);
  EXPECT_EQ(p.Find("s")->num_elements, 1);
  EXPECT_EQ(p.Find("s")->parts[0].num_elements, 1);
}

TEST(PlacementTest, OneServerHoldsEverythingUnsplit) {
  ASSERT_OK_AND_ASSIGN(Placement p, PlaceVariables({{"w", {100, 100}}}, 1, 1));
  EXPECT_EQ(p.Find("w")->parts.size(), 1u);
  EXPECT_EQ(p.Find("w")->parts[0].name, "w");
}

TEST(PlacementTest, BadInputIsRejected) {
  EXPECT_THAT(PlaceVariables({{"w", {3}}, {"w", {4}}}, 2, kNoSplit),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"w\" is defined twice")));
  EXPECT_THAT(
      PlaceVariables({{"w", {3, 0}}}, 2, kNoSplit),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("shape [3, 0]")));
  EXPECT_THAT(PlaceVariables({{"", {3}}}, 2, kNoSplit),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PlaceVariables({{"w", {3}}}, 0, kNoSplit),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("at least one parameter server")));
}

// Each server updates its own part: a split moving average must be one on
// every server, and trainable variables beside it stay trainable.
TEST(PlacementTest, EveryPartCarriesItsVariablesUpdateRule) {
  LogicalVariable mean{"bn/moving_mean", {10, 4}};
  mean.update = VariableUpdate::kMovingAverage;
  mean.momentum = 0.99f;
  ASSERT_OK_AND_ASSIGN(Placement p,
                       PlaceVariables({mean, {"dense/kernel", {10, 4}}}, 3,
                                      /*split_threshold_bytes=*/100));
  const PlacedVariable& placed = *p.Find("bn/moving_mean");
  EXPECT_EQ(placed.update, VariableUpdate::kMovingAverage);
  EXPECT_EQ(placed.momentum, 0.99f);
  ASSERT_EQ(placed.parts.size(), 3u);
  for (const VariablePart& part : placed.parts) {
    EXPECT_EQ(part.update, VariableUpdate::kMovingAverage) << part.name;
    EXPECT_EQ(part.momentum, 0.99f) << part.name;
  }
  const PlacedVariable& kernel = *p.Find("dense/kernel");
  EXPECT_EQ(kernel.update, VariableUpdate::kOptimizer);
  for (const VariablePart& part : kernel.parts) {
    EXPECT_EQ(part.update, VariableUpdate::kOptimizer) << part.name;
    EXPECT_EQ(part.momentum, 0.0f) << part.name;
  }
}

}  // namespace
}  // namespace psflow
