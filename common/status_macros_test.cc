#include "common/status_macros.h"

#include <memory>
#include <string>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

absl::Status FailIf(bool fail) {
  return fail ? absl::InvalidArgumentError("asked to fail") : absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<int>> MakeIntOrFail(bool fail, int value) {
  if (fail) return absl::NotFoundError("no int");
  return std::make_unique<int>(value);
}

absl::Status TwoSteps(bool fail_first, bool fail_second, int* steps) {
  RETURN_IF_ERROR(FailIf(fail_first));
  ++*steps;
  RETURN_IF_ERROR(FailIf(fail_second));
  ++*steps;
  return absl::OkStatus();
}

absl::StatusOr<int> AddBoxed(bool fail, int a, int b) {
  ASSIGN_OR_RETURN(std::unique_ptr<int> boxed, MakeIntOrFail(fail, a));
  ASSIGN_OR_RETURN(auto other, MakeIntOrFail(false, b));  // Same line rule.
  return *boxed + *other;
}

TEST(StatusMacrosTest, ReturnIfErrorStopsAtTheFirstError) {
  int steps = 0;
  EXPECT_THAT(TwoSteps(false, true, &steps),
              StatusIs(absl::StatusCode::kInvalidArgument, "asked to fail"));
  EXPECT_EQ(steps, 1);
}

TEST(StatusMacrosTest, ReturnIfErrorPassesThroughOk) {
  int steps = 0;
  EXPECT_OK(TwoSteps(false, false, &steps));
  EXPECT_EQ(steps, 2);
}

TEST(StatusMacrosTest, AssignOrReturnMovesTheValueOut) {
  ASSERT_OK_AND_ASSIGN(int sum, AddBoxed(false, 2, 3));
  EXPECT_EQ(sum, 5);
}

TEST(StatusMacrosTest, AssignOrReturnPropagatesTheError) {
  EXPECT_THAT(AddBoxed(true, 2, 3),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no int")));
}

TEST(StatusMatchersTest, IsOkAndHoldsChecksTheValue) {
  EXPECT_THAT(AddBoxed(false, 2, 3), IsOkAndHolds(5));
  EXPECT_THAT(AddBoxed(false, 2, 3), ::testing::Not(IsOkAndHolds(6)));
  EXPECT_THAT(AddBoxed(true, 2, 3), ::testing::Not(IsOkAndHolds(5)));
}

TEST(StatusMatchersTest, IsOkRejectsAnError) {
  EXPECT_THAT(FailIf(true), ::testing::Not(IsOk()));
  EXPECT_THAT(MakeIntOrFail(true, 1), ::testing::Not(IsOk()));
}

TEST(StatusMatchersTest, StatusIsChecksTheCodeAndTheMessage) {
  EXPECT_THAT(FailIf(true), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(FailIf(true),
              ::testing::Not(StatusIs(absl::StatusCode::kNotFound)));
  EXPECT_THAT(FailIf(true),
              ::testing::Not(StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr("other text"))));
}

}  // namespace
}  // namespace psflow
