#include "common/fault_point.h"

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

TEST(FaultPointTest, ParsesNamesAndPauses) {
  ASSERT_OK_AND_ASSIGN(auto points,
                       ParseFaultPoints("chief.final_save=2s, ps.x=250ms@3,"));
  EXPECT_THAT(points,
              UnorderedElementsAre(
                  Pair("chief.final_save", FaultPause{absl::Seconds(2), 1}),
                  Pair("ps.x", FaultPause{absl::Milliseconds(250), 3})));
  ASSERT_OK_AND_ASSIGN(auto none, ParseFaultPoints(""));
  EXPECT_TRUE(none.empty());
}

TEST(FaultPointTest, RefusesMalformedEntriesNamingThem) {
  for (const char* bad : {"chief.final_save", "=2s", "a=", "a=two seconds",
                          "a=-1s", "a=2h", "a=1s@0", "a=1s@x", "a=@2"}) {
    EXPECT_THAT(ParseFaultPoints(bad),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(bad)))
        << bad;
  }
}

TEST(FaultPointTest, AnUnconfiguredPointDoesNotPause) {
  // The test runs without PSFLOW_FAULT_POINTS.
  const absl::Time start = absl::Now();
  FaultPoint("chief.final_save");
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
}

}  // namespace
}  // namespace psflow
