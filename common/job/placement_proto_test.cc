#include "common/job/placement_proto.h"

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

// Workers and the evaluator take the placement from the JobSpec: what the
// chief placed must come back whole, update rules included.
TEST(PlacementProtoTest, RoundTripKeepsEveryPartsUpdateRule) {
  LogicalVariable mean{"bn/moving_var", {6, 2}};
  mean.update = VariableUpdate::kMovingAverage;
  mean.momentum = 0.9f;
  ASSERT_OK_AND_ASSIGN(Placement placed,
                       PlaceVariables({mean, {"dense/bias", {2}}}, 2,
                                      /*split_threshold_bytes=*/16));
  JobSpec spec;
  PlacementToProto(placed, spec);
  ASSERT_OK_AND_ASSIGN(Placement back, PlacementFromProto(spec, 2));
  const PlacedVariable& v = *back.Find("bn/moving_var");
  EXPECT_EQ(v.update, VariableUpdate::kMovingAverage);
  EXPECT_EQ(v.momentum, 0.9f);
  ASSERT_EQ(v.parts.size(), 2u);
  for (const VariablePart& part : v.parts) {
    EXPECT_EQ(part.update, VariableUpdate::kMovingAverage) << part.name;
    EXPECT_EQ(part.momentum, 0.9f) << part.name;
  }
  EXPECT_EQ(back.Find("dense/bias")->update, VariableUpdate::kOptimizer);
  EXPECT_EQ(back.Find("dense/bias")->parts[0].update,
            VariableUpdate::kOptimizer);
}

// Tables live on every server; the spec's tables are the placement's.
TEST(PlacementProtoTest, TablesComeFromTheJobSpec) {
  JobSpec spec;
  EmbeddingTableSpec* table = spec.add_tables();
  table->set_name("emb");
  table->set_dim(16);
  ASSERT_OK_AND_ASSIGN(Placement back, PlacementFromProto(spec, 3));
  ASSERT_EQ(back.tables.size(), 1u);
  EXPECT_EQ(back.tables[0].name, "emb");
  EXPECT_EQ(back.tables[0].dim, 16);
}

TEST(PlacementProtoTest, UnknownUpdateRuleIsRejected) {
  ASSERT_OK_AND_ASSIGN(Placement placed, PlaceVariables({{"w", {2}}}, 1, 16));
  JobSpec spec;
  PlacementToProto(placed, spec);
  spec.mutable_placement(0)->set_update(static_cast<VariableSpec::Update>(7));
  EXPECT_THAT(PlacementFromProto(spec, 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"w\" update rule 7")));
}

}  // namespace
}  // namespace psflow
