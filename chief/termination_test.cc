#include "chief/termination.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::ElementsAre;
using ::testing::ExitedWithCode;

// The exits a ChiefTermination asked for, instead of exiting (shared with
// its threads, which may outlive a test's locals).
struct Exits {
  mutable Mutex mu;
  std::vector<int> codes ABSL_GUARDED_BY(mu);
  void Record(int code) {
    MutexLock lock(&mu);
    codes.push_back(code);
  }
  // Blocks until `count` exits were asked for; their codes.
  std::vector<int> Await(size_t count) const {
    MutexLock lock(&mu);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      return codes.size() >= count;
    };
    mu.Await(Condition(&enough));
    return codes;
  }
};

ChiefTermination::Options Recording(
    const std::shared_ptr<Exits>& exits,
    absl::Duration stop_bound = absl::Hours(1)) {
  ChiefTermination::Options options;
  options.save_bound = absl::Hours(1);
  options.stop_bound = stop_bound;
  options.exit = [exits](int code) { exits->Record(code); };
  return options;
}

TEST(ChiefTerminationTest, ASignalDuringTrainingAsksForTheSave) {
  ChiefTermination termination(absl::Hours(1));
  EXPECT_FALSE(termination.requested().has_value());
  EXPECT_EQ(termination.ExitCode(1), 1);
  termination.SetTraining(true);
  termination.OnSignal("SIGTERM");
  EXPECT_EQ(termination.requested(), "SIGTERM");
  EXPECT_EQ(termination.ExitCode(1), 128 + 15);
}

// Outside training the chief's stop handler ends the job (fails it, stops
// the servers, releases the checkpoint directory), on a thread of its own,
// and only then does the process exit.
TEST(ChiefTerminationTest, ASignalOutsideTrainingRunsTheStopThenExits) {
  auto exits = std::make_shared<Exits>();
  ChiefTermination termination(Recording(exits));
  Notification release;
  std::atomic<bool> stopped{false};
  std::string stopped_for;
  termination.SetStopHandler([&](const std::string& signal) {
    stopped_for = signal;
    release.WaitForNotification();
    stopped = true;
  });
  termination.OnSignal("SIGTERM");  // returns: the stop runs elsewhere
  EXPECT_EQ(termination.requested(), "SIGTERM");
  EXPECT_FALSE(stopped);
  release.Notify();
  EXPECT_THAT(exits->Await(1), ElementsAre(128 + 15));
  EXPECT_TRUE(stopped) << "exited before the stop was done";
  EXPECT_EQ(stopped_for, "SIGTERM");
  termination.ClearStopHandler();
}

// Training began after the stop was asked for: no save is made for it.
TEST(ChiefTerminationTest, TrainingDoesNotBeginOnceAStopWasAskedFor) {
  auto exits = std::make_shared<Exits>();
  ChiefTermination termination(Recording(exits));
  termination.SetStopHandler([](const std::string&) {});
  termination.OnSignal("SIGINT");
  EXPECT_THAT(exits->Await(1), ElementsAre(128 + 2));
  EXPECT_FALSE(termination.SetTraining(true));  // the caller must not train
  termination.OnSignal("SIGINT");               // a second signal: at once
  EXPECT_THAT(exits->Await(2), ElementsAre(128 + 2, 128 + 2));
  termination.ClearStopHandler();
}

TEST(ChiefTerminationTest, ASecondSignalDuringTheStopExitsAtOnce) {
  auto exits = std::make_shared<Exits>();
  ChiefTermination termination(Recording(exits));
  Notification release;
  termination.SetStopHandler(
      [&](const std::string&) { release.WaitForNotification(); });
  termination.OnSignal("SIGTERM");
  termination.OnSignal("SIGINT");
  EXPECT_THAT(exits->Await(1), ElementsAre(128 + 2));
  release.Notify();
  exits->Await(2);  // the stop's thread ends too
  termination.ClearStopHandler();
}

TEST(ChiefTerminationTest, AStopOverrunningItsBoundExits) {
  auto exits = std::make_shared<Exits>();
  ChiefTermination termination(Recording(exits, absl::Milliseconds(10)));
  Notification release;
  termination.SetStopHandler(
      [&](const std::string&) { release.WaitForNotification(); });
  termination.OnSignal("SIGTERM");
  EXPECT_THAT(exits->Await(1), ElementsAre(128 + 15));
  release.Notify();
  exits->Await(2);
  termination.ClearStopHandler();
}

// The preemption save outlived its bound (a server's disk hung): the
// stop handler ends the job without it (the result says so, the servers
// are told to stop, the directory released), then the process exits.
TEST(ChiefTerminationTest, ASaveOverrunningItsBoundRunsTheStopThenExits) {
  auto exits = std::make_shared<Exits>();
  ChiefTermination::Options options = Recording(exits);
  options.save_bound = absl::Milliseconds(10);
  ChiefTermination termination(options);
  std::atomic<bool> stopped{false};
  std::string stopped_for;
  termination.SetStopHandler([&](const std::string& signal) {
    stopped_for = signal;
    stopped = true;
  });
  ASSERT_TRUE(termination.SetTraining(true));
  termination.OnSignal("SIGTERM");  // the supervisor's save never returns
  EXPECT_THAT(exits->Await(1), ElementsAre(128 + 15));
  EXPECT_TRUE(stopped) << "exited without ending the job";
  EXPECT_EQ(stopped_for, "SIGTERM");
  termination.OnSignal("SIGTERM");  // a second signal: at once, no stop
  EXPECT_THAT(exits->Await(2), ElementsAre(128 + 15, 128 + 15));
  termination.ClearStopHandler();
}

// The save finished and the supervisor returned (training is over): the
// chief ends the job itself; the bound only exits, never a second stop.
TEST(ChiefTerminationTest, ASaveThatReturnedIsNotStoppedAgain) {
  auto exits = std::make_shared<Exits>();
  ChiefTermination::Options options = Recording(exits);
  // Long beside the two calls between the signal and the supervisor's
  // return below, which must come before it.
  options.save_bound = absl::Seconds(3);
  ChiefTermination termination(options);
  std::atomic<int> stops{0};
  termination.SetStopHandler([&](const std::string&) { ++stops; });
  ASSERT_TRUE(termination.SetTraining(true));
  termination.OnSignal("SIGINT");
  termination.SetTraining(false);  // the supervisor returned
  EXPECT_THAT(exits->Await(1), ElementsAre(128 + 2));
  EXPECT_EQ(stops, 0);
  termination.ClearStopHandler();
}

TEST(ChiefTerminationDeathTest, WithoutAStopHandlerASignalExitsAtOnce) {
  ChiefTermination termination(absl::Hours(1));
  EXPECT_EXIT(termination.OnSignal("SIGINT"), ExitedWithCode(128 + 2),
              "received SIGINT; exiting");
}

TEST(ChiefTerminationDeathTest, TheStopEndsTheProcess) {
  EXPECT_EXIT(
      {
        ChiefTermination termination(absl::Hours(1));
        termination.SetStopHandler([](const std::string&) {});
        termination.OnSignal("SIGTERM");
        Notification never;  // the chief's thread, stuck
        never.WaitForNotification();
      },
      ExitedWithCode(128 + 15), "the job is stopped \\(SIGTERM\\); exiting");
}

TEST(ChiefTerminationDeathTest, ASecondSignalExitsAtOnce) {
  EXPECT_EXIT(
      {
        ChiefTermination termination(absl::Hours(1));
        termination.SetTraining(true);
        termination.OnSignal("SIGTERM");
        termination.OnSignal("SIGTERM");
      },
      ExitedWithCode(128 + 15), "without waiting for the checkpoint");
}

TEST(ChiefTerminationDeathTest, ASaveOverrunningItsBoundExits) {
  EXPECT_EXIT(
      {
        ChiefTermination termination(absl::Milliseconds(10));
        termination.SetTraining(true);
        termination.OnSignal("SIGTERM");
        Notification never;  // the save that never ends
        never.WaitForNotification();
      },
      ExitedWithCode(128 + 15), "did not finish within");
}

}  // namespace
}  // namespace psflow
