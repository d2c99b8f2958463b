#include "common/timeout_flag.h"

#include <limits>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

TEST(TimeoutFlagTest, APositiveValueIsThatManySeconds) {
  EXPECT_THAT(ReadTimeoutFlag("heartbeat_timeout_s", 60, ZeroSeconds::kRefused),
              IsOkAndHolds(absl::Seconds(60)));
  EXPECT_THAT(ReadTimeoutFlag("chief_timeout_s", 0.5, ZeroSeconds::kNever),
              IsOkAndHolds(absl::Milliseconds(500)));
}

TEST(TimeoutFlagTest, ZeroIsNeverOnlyWhereItMeansThat) {
  EXPECT_THAT(ReadTimeoutFlag("chief_timeout_s", 0, ZeroSeconds::kNever),
              IsOkAndHolds(absl::InfiniteDuration()));
  EXPECT_THAT(
      ReadTimeoutFlag("heartbeat_timeout_s", 0, ZeroSeconds::kRefused),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("--heartbeat_timeout_s=0 is zero; use a positive "
                         "number of seconds")));
}

TEST(TimeoutFlagTest, NegativeAndNonFiniteValuesAreRefusedByName) {
  for (ZeroSeconds zero : {ZeroSeconds::kNever, ZeroSeconds::kRefused}) {
    EXPECT_THAT(ReadTimeoutFlag("startup_timeout_s", -1, zero),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("--startup_timeout_s=-1 is negative")));
    EXPECT_THAT(ReadTimeoutFlag("startup_timeout_s",
                                std::numeric_limits<double>::infinity(), zero),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("--startup_timeout_s=inf is not a number "
                                   "of seconds")));
    EXPECT_THAT(ReadTimeoutFlag("startup_timeout_s",
                                std::numeric_limits<double>::quiet_NaN(), zero),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("is not a number of seconds")));
  }
  EXPECT_THAT(ReadTimeoutFlag("chief_timeout_s", -5, ZeroSeconds::kNever),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("or 0 for never")));
}

}  // namespace
}  // namespace psflow
