#include "ps/chief_fence.h"

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Optional;

const absl::Time kStart = absl::FromUnixSeconds(1000);

TEST(ChiefFenceTest, TheFirstChiefOwnsTheServerAndOthersAreRefused) {
  ChiefFence fence(absl::Seconds(10));
  EXPECT_EQ(fence.owner(), std::nullopt);
  EXPECT_EQ(fence.OwnerSilence(kStart), std::nullopt) << "no chief yet";
  ASSERT_OK(fence.Admit("a1", "Configure", kStart));
  EXPECT_THAT(fence.owner(), Optional(std::string("a1")));
  ASSERT_OK(fence.Admit("a1", "Stats", kStart + absl::Seconds(5)));
  EXPECT_THAT(
      fence.Admit("b2", "Shutdown", kStart + absl::Seconds(6)),
      StatusIs(absl::StatusCode::kAborted,
               AllOf(HasSubstr("Shutdown refused"),
                     HasSubstr("follows chief incarnation a1"),
                     HasSubstr("called 1s ago"), HasSubstr("incarnation b2"),
                     HasSubstr("--chief_takeover_s"))));
  EXPECT_THAT(fence.owner(), Optional(std::string("a1")));
  EXPECT_THAT(fence.OwnerSilence(kStart + absl::Seconds(7)),
              Optional(absl::Seconds(2)))
      << "a refused call is no sign of the owner's life";
}

TEST(ChiefFenceTest, ASilentOwnerIsTakenOverAndThenRefused) {
  ChiefFence fence(absl::Seconds(10));
  ASSERT_OK(fence.Admit("a1", "Stats", kStart));
  // Exactly the limit is not yet silence enough.
  EXPECT_THAT(fence.Admit("b2", "Configure", kStart + absl::Seconds(10)),
              StatusIs(absl::StatusCode::kAborted));
  ASSERT_OK(fence.Admit("b2", "Configure", kStart + absl::Seconds(11)));
  EXPECT_THAT(fence.owner(), Optional(std::string("b2")));
  // The old chief comes back: the new one is live, so it is refused.
  EXPECT_THAT(fence.Admit("a1", "RestoreShard", kStart + absl::Seconds(12)),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("follows chief incarnation b2")));
}

TEST(ChiefFenceTest, ALongCallOfTheOwnerIsASignOfLife) {
  ChiefFence fence(absl::Seconds(10));
  ASSERT_OK(fence.Admit("a1", "SaveShard", kStart));
  fence.CallStarted();
  EXPECT_EQ(fence.OwnerSilence(kStart + absl::Minutes(20)), std::nullopt);
  EXPECT_THAT(fence.Admit("b2", "Hold", kStart + absl::Minutes(20)),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("has a call in progress")));
  fence.CallEnded(kStart + absl::Minutes(20));
  EXPECT_THAT(fence.OwnerSilence(kStart + absl::Minutes(20) + absl::Seconds(3)),
              Optional(absl::Seconds(3)));
  EXPECT_THAT(fence.Admit("b2", "Hold", kStart + absl::Minutes(20)),
              StatusIs(absl::StatusCode::kAborted));
}

TEST(ChiefFenceTest, CallsWithoutAnIncarnationAreOneChiefOfTheirOwn) {
  ChiefFence fence(absl::Seconds(10));
  ASSERT_OK(fence.Admit("", "CreateVariables", kStart));
  ASSERT_OK(fence.Admit("", "Assign", kStart + absl::Seconds(1)));
  EXPECT_THAT(fence.Admit("a1", "Configure", kStart + absl::Seconds(2)),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("follows chief incarnation (none)")));
}

}  // namespace
}  // namespace psflow
