#include "common/clock.h"

#include <thread>

#include "gtest/gtest.h"

namespace psflow {
namespace {

TEST(RealClockTest, SleepsUntilTheDeadline) {
  Clock& clock = RealClock();
  const absl::Time deadline = clock.Now() + absl::Milliseconds(20);
  clock.SleepUntil(deadline);
  EXPECT_GE(clock.Now(), deadline);
  clock.SleepUntil(deadline - absl::Hours(1));  // in the past: no wait
}

TEST(RealClockTest, AwaitReturnsWhetherTheConditionHolds) {
  Mutex mu;
  bool flag = false;
  MutexLock lock(&mu);
  Clock& clock = RealClock();
  EXPECT_FALSE(clock.AwaitWithDeadline(mu, Condition(&flag),
                                       clock.Now() + absl::Milliseconds(5)));
  flag = true;
  EXPECT_TRUE(clock.AwaitWithDeadline(mu, Condition(&flag), clock.Now()));
}

TEST(FakeClockTest, MovesOnlyWhenTold) {
  FakeClock clock;
  const absl::Time start = clock.Now();
  EXPECT_EQ(clock.Now(), start);
  clock.Advance(absl::Hours(3));
  EXPECT_EQ(clock.Now(), start + absl::Hours(3));
  clock.SetTime(start);
  EXPECT_EQ(clock.Now(), start);
}

TEST(FakeClockTest, SleepEndsWhenTheClockReachesTheDeadline) {
  FakeClock clock;
  const absl::Time deadline = clock.Now() + absl::Minutes(5);
  bool woke = false;
  std::thread sleeper([&] {
    clock.SleepUntil(deadline);
    woke = true;
  });
  clock.AwaitWaiters(1);
  clock.Advance(absl::Minutes(4));
  EXPECT_EQ(clock.waiters(), 1);  // still asleep at 4 of 5 minutes
  clock.Advance(absl::Minutes(1));
  sleeper.join();
  EXPECT_TRUE(woke);
  EXPECT_EQ(clock.waiters(), 0);
}

TEST(FakeClockTest, AwaitGivesUpAtTheFakeDeadline) {
  FakeClock clock;
  Mutex mu;
  bool flag = false;
  bool result = true;
  std::thread waiter([&] {
    MutexLock lock(&mu);
    result = clock.AwaitWithDeadline(mu, Condition(&flag),
                                     clock.Now() + absl::Hours(1));
  });
  clock.AwaitWaiters(1);
  clock.Advance(absl::Hours(1));
  waiter.join();
  EXPECT_FALSE(result);
}

TEST(FakeClockTest, AwaitEndsWhenTheConditionHolds) {
  FakeClock clock;
  Mutex mu;
  bool flag = false;
  bool result = false;
  std::thread waiter([&] {
    MutexLock lock(&mu);
    result = clock.AwaitWithDeadline(mu, Condition(&flag),
                                     clock.Now() + absl::Hours(1));
  });
  clock.AwaitWaiters(1);
  {
    MutexLock lock(&mu);
    flag = true;
  }
  waiter.join();
  EXPECT_TRUE(result);
}

TEST(FakeClockTest, AutoAdvanceRunsThroughTimeouts) {
  FakeClock clock;
  clock.SetAutoAdvance(true);
  const absl::Time start = clock.Now();
  clock.SleepFor(absl::Hours(2));
  EXPECT_EQ(clock.Now(), start + absl::Hours(2));
  Mutex mu;
  bool flag = false;
  MutexLock lock(&mu);
  EXPECT_FALSE(clock.AwaitWithDeadline(mu, Condition(&flag),
                                       clock.Now() + absl::Hours(1)));
  EXPECT_EQ(clock.Now(), start + absl::Hours(3));
  flag = true;  // a condition that holds never moves the clock
  EXPECT_TRUE(clock.AwaitWithDeadline(mu, Condition(&flag),
                                      clock.Now() + absl::Hours(1)));
  EXPECT_EQ(clock.Now(), start + absl::Hours(3));
}

}  // namespace
}  // namespace psflow
