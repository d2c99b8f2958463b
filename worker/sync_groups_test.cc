#include "worker/sync_groups.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::ElementsAre;

// Sizes in floats: 100, 1, 50, 50, 1 (400, 4, 200, 200, 4 bytes).
std::vector<LogicalVariable> Variables() {
  return {{"a", {100}}, {"b", {1}}, {"c", {50}}, {"d", {50}}, {"e", {1}}};
}

TEST(ForwardGroupsTest, GroupsCloseOnceTheyHoldTheBytesInModelOrder) {
  EXPECT_THAT(
      ForwardGroups(Variables(), 400),
      ElementsAre(ElementsAre(0), ElementsAre(1, 2, 3), ElementsAre(4)));
}

TEST(ForwardGroupsTest, NoBytesMeansOneVariablePerGroup) {
  EXPECT_THAT(ForwardGroups(Variables(), 0),
              ElementsAre(ElementsAre(0), ElementsAre(1), ElementsAre(2),
                          ElementsAre(3), ElementsAre(4)));
}

TEST(ForwardGroupsTest, AThresholdAboveTheModelIsOneGroup) {
  EXPECT_THAT(ForwardGroups(Variables(), 1 << 20),
              ElementsAre(ElementsAre(0, 1, 2, 3, 4)));
}

}  // namespace
}  // namespace psflow
