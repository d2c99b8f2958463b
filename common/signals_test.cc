#include "common/signals.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::ElementsAre;

// One test: the watch is once per process.
TEST(SignalsTest, EachWatchedSignalReachesTheCallbackByName) {
  BlockTerminationSignals(Hangup::kStop);
  Mutex mu;
  std::vector<std::string> received;
  WatchTerminationSignals(
      [&](const std::string& name) {
        MutexLock lock(&mu);
        received.push_back(name);
      },
      Hangup::kStop);
  // With Hangup::kDefault, SIGHUP would end this process instead.
  for (int signal : {SIGTERM, SIGINT, SIGHUP}) {
    MutexLock lock(&mu);
    const size_t before = received.size();
    ASSERT_EQ(kill(getpid(), signal), 0);
    struct Arrived {
      const std::vector<std::string>* received;
      size_t before;
      bool Check() const { return received->size() > before; }
    } arrived{&received, before};
    // A bound, not an expected time.
    ASSERT_TRUE(mu.AwaitWithTimeout(Condition(&arrived, &Arrived::Check),
                                    absl::Seconds(30)))
        << "no callback for signal " << signal;
  }
  MutexLock lock(&mu);
  EXPECT_THAT(received, ElementsAre("SIGTERM", "SIGINT", "SIGHUP"));
}

constexpr pid_t kParent = 4242;

TEST(ParentDeathRepeatsTest, ABurstFromAnExitingParentIsOneSignal) {
  FakeClock clock;
  clock.SetAutoAdvance(true);
  ParentDeathRepeats repeats(
      kParent, [] { return true; }, &clock);
  EXPECT_FALSE(repeats.IsRepeat(SIGTERM, SI_USER, kParent));
  EXPECT_TRUE(repeats.IsRepeat(SIGTERM, SI_USER, kParent));
  clock.Advance(absl::Milliseconds(300));
  EXPECT_TRUE(repeats.IsRepeat(SIGTERM, SI_USER, kParent));
  // Another signal, another sender, or one long after: each a request.
  EXPECT_FALSE(repeats.IsRepeat(SIGINT, SI_USER, kParent));
  EXPECT_FALSE(repeats.IsRepeat(SIGINT, SI_USER, kParent + 1));
  EXPECT_FALSE(repeats.IsRepeat(SIGINT, SI_KERNEL, kParent));
  clock.Advance(ParentDeathRepeats::kBurst + absl::Milliseconds(1));
  EXPECT_FALSE(repeats.IsRepeat(SIGINT, SI_USER, kParent));
}

TEST(ParentDeathRepeatsTest, ALivingParentsSecondSignalCounts) {
  FakeClock clock;
  clock.SetAutoAdvance(true);
  int asked = 0;
  ParentDeathRepeats repeats(
      kParent,
      [&asked] {
        ++asked;
        return false;
      },
      &clock);
  EXPECT_FALSE(repeats.IsRepeat(SIGTERM, SI_USER, kParent));
  EXPECT_EQ(asked, 0) << "a first signal waits for nothing";
  const absl::Time before = clock.Now();
  EXPECT_FALSE(repeats.IsRepeat(SIGTERM, SI_USER, kParent));
  EXPECT_GE(clock.Now() - before, ParentDeathRepeats::kSettle);
  EXPECT_GT(asked, 1);
}

TEST(ParentDeathRepeatsTest, AParentThatExitsWhileAskedMakesItARepeat) {
  FakeClock clock;
  clock.SetAutoAdvance(true);
  int asked = 0;
  ParentDeathRepeats repeats(
      kParent, [&asked] { return ++asked >= 3; }, &clock);
  EXPECT_FALSE(repeats.IsRepeat(SIGTERM, SI_USER, kParent));
  EXPECT_TRUE(repeats.IsRepeat(SIGTERM, SI_USER, kParent));
  EXPECT_EQ(asked, 3);
}

TEST(ProcessEndedTest, AReapedOrZombieChildHasEndedALivingOneNot) {
  EXPECT_FALSE(ProcessEnded(getpid()));
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  // A zombie until reaped.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!ProcessEnded(child) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_TRUE(ProcessEnded(child));
  int status;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(ProcessEnded(child));
}

}  // namespace
}  // namespace psflow
