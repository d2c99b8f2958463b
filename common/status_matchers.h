// GoogleTest matchers and assertions for absl::Status and absl::StatusOr.
//
//   EXPECT_OK(DoThing());
//   ASSERT_OK_AND_ASSIGN(TfConfig config, ParseTfConfig(json));
//   EXPECT_THAT(Parse(bad), StatusIs(absl::StatusCode::kInvalidArgument,
//                                    HasSubstr("task.index")));
//
// Shaped like the matchers in later abseil releases so they can be swapped.
#ifndef PSFLOW_COMMON_STATUS_MATCHERS_H_
#define PSFLOW_COMMON_STATUS_MATCHERS_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace testing_internal {

inline const absl::Status& GetStatus(const absl::Status& status) {
  return status;
}

template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

}  // namespace testing_internal

// Matches an OK Status or a StatusOr holding a value.
MATCHER(IsOk, negation ? "is not OK" : "is OK") {
  const absl::Status& status = ::psflow::testing_internal::GetStatus(arg);
  if (!status.ok()) *result_listener << "status is " << status;
  return status.ok();
}

// Matches a Status (or StatusOr) with `code` and a message matching
// `message_matcher` (a string or any gMock string matcher).
MATCHER_P2(StatusIs, code, message_matcher,
           "has code " + absl::StatusCodeToString(code)) {
  const absl::Status& status = ::psflow::testing_internal::GetStatus(arg);
  *result_listener << "status is " << status;
  return status.code() == code &&
         ::testing::Matches(::testing::Matcher<std::string>(message_matcher))(
             std::string(status.message()));
}

// Matches a Status (or StatusOr) with `code` and any message.
MATCHER_P(StatusIs, code, "has code " + absl::StatusCodeToString(code)) {
  const absl::Status& status = ::psflow::testing_internal::GetStatus(arg);
  *result_listener << "status is " << status;
  return status.code() == code;
}

// Matches a StatusOr holding a value that matches `value_matcher`.
MATCHER_P(IsOkAndHolds, value_matcher, "is OK and holds a matching value") {
  if (!arg.ok()) {
    *result_listener << "status is " << arg.status();
    return false;
  }
  return ::testing::ExplainMatchResult(value_matcher, *arg, result_listener);
}

}  // namespace psflow

#define EXPECT_OK(expr) EXPECT_THAT((expr), ::psflow::IsOk())
#define ASSERT_OK(expr) ASSERT_THAT((expr), ::psflow::IsOk())

// Asserts that `rexpr` (a StatusOr) holds a value and moves it into `lhs`.
#define ASSERT_OK_AND_ASSIGN(lhs, rexpr)                                   \
  PSFLOW_ASSERT_OK_AND_ASSIGN_IMPL(                                        \
      PSFLOW_STATUS_MACROS_CONCAT(psflow_assert_statusor_, __LINE__), lhs, \
      rexpr)

#define PSFLOW_ASSERT_OK_AND_ASSIGN_IMPL(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                     \
  ASSERT_TRUE(statusor.ok()) << statusor.status();             \
  lhs = std::move(statusor).value()

#endif  // PSFLOW_COMMON_STATUS_MATCHERS_H_
