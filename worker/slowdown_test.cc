#include "worker/slowdown.h"

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

TEST(SlowdownTest, FullSpeedNeverSleeps) {
  Slowdown none;
  EXPECT_FALSE(none.SlowAt(absl::Now(), 0, 1));
  EXPECT_EQ(none.Delay(absl::Now(), absl::Milliseconds(5), 0, 1),
            absl::ZeroDuration());
}

TEST(SlowdownTest, AlwaysSlowStretchesEveryStep) {
  Slowdown slow{4};
  EXPECT_TRUE(slow.SlowAt(absl::Now(), 3, 4));
  EXPECT_EQ(slow.Delay(absl::Now(), absl::Milliseconds(5), 3, 4),
            absl::Milliseconds(15));
}

TEST(SlowdownTest, RotatingTurnsMakeExactlyOneWorkerSlowAtATime) {
  Slowdown rotating{3, absl::Milliseconds(100)};
  const absl::Time start = absl::FromUnixMillis(1'800'000'000'000);
  for (int ms = 0; ms < 2000; ms += 7) {
    const absl::Time now = start + absl::Milliseconds(ms);
    int slow = 0, which = -1;
    for (int w = 0; w < 4; ++w) {
      if (rotating.SlowAt(now, w, 4)) {
        ++slow;
        which = w;
      }
    }
    EXPECT_EQ(slow, 1) << ms;
    // Turns of 100 ms, in worker order.
    EXPECT_EQ(which, (1'800'000'000'000 / 100 + ms / 100) % 4) << ms;
  }
}

}  // namespace
}  // namespace psflow
