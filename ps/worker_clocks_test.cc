#include "ps/worker_clocks.h"

#include <atomic>
#include <thread>
#include <vector>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

// Pushes `steps` whole steps (one call each) for `worker`, from its clock.
void PushSteps(WorkerClocks& clocks, int worker, int steps) {
  const int64_t from = clocks.ClockOf(worker);
  for (int i = 0; i < steps; ++i) clocks.OnPushApplied(worker, from + i, 1);
}

TEST(WorkerClocksTest, PullWithinTheBoundIsAllowedAtOnce) {
  WorkerClocks clocks(3, 2);
  // Everyone at 0: steps 0..2 are within 2 of the slowest.
  for (int64_t step : {0, 1, 2}) {
    EXPECT_TRUE(clocks.Allows(step));
    bool ran = false;
    EXPECT_EQ(clocks.WhenAllowed(step, [&] { ran = true; }), std::nullopt);
    EXPECT_FALSE(ran);  // Allowed now: the caller goes on, no callback.
  }
  EXPECT_FALSE(clocks.Allows(3));
}

TEST(WorkerClocksTest, PullAheadWaitsUntilTheSlowestCatchesUp) {
  WorkerClocks clocks(3, 2);
  PushSteps(clocks, 0, 5);
  PushSteps(clocks, 1, 4);
  // Worker 2 is at 0; worker 0 wants its step 5: needs everyone at >= 3.
  int released = 0;
  std::optional<uint64_t> id = clocks.WhenAllowed(5, [&] { ++released; });
  ASSERT_TRUE(id.has_value());
  PushSteps(clocks, 2, 2);
  EXPECT_EQ(released, 0);  // worker 2 at 2: still too far behind
  PushSteps(clocks, 2, 1);
  EXPECT_EQ(released, 1);            // at 3: 5 - 3 <= 2
  EXPECT_FALSE(clocks.Cancel(*id));  // It ran; nothing to cancel.
}

TEST(WorkerClocksTest, ZeroStalenessIsALockStepBarrier) {
  WorkerClocks clocks(2, 0);
  // Step 1 needs both workers' step 0, the puller's own included.
  EXPECT_FALSE(clocks.Allows(1));
  PushSteps(clocks, 0, 1);
  EXPECT_FALSE(clocks.Allows(1));
  PushSteps(clocks, 1, 1);
  EXPECT_TRUE(clocks.Allows(1));
  EXPECT_FALSE(clocks.Allows(2));
}

TEST(WorkerClocksTest, AStepInSeveralCallsCountsWhenAllAreApplied) {
  WorkerClocks clocks(2, 0);
  PushSteps(clocks, 1, 1);
  clocks.OnPushApplied(0, 0, 3);
  clocks.OnPushApplied(0, 0, 3);
  EXPECT_EQ(clocks.ClockOf(0), 0);
  EXPECT_FALSE(clocks.Allows(1));
  clocks.OnPushApplied(0, 0, 3);
  EXPECT_EQ(clocks.ClockOf(0), 1);
  EXPECT_TRUE(clocks.Allows(1));
}

TEST(WorkerClocksTest, OverlappingAndRepeatedStepsNeverMoveAClockBack) {
  WorkerClocks clocks(1, 0);
  // Step 1's two calls complete before step 0's second one.
  clocks.OnPushApplied(0, 0, 2);
  clocks.OnPushApplied(0, 1, 2);
  clocks.OnPushApplied(0, 1, 2);
  EXPECT_EQ(clocks.ClockOf(0), 2);
  clocks.OnPushApplied(0, 0, 2);  // Late; already counted by step 1.
  clocks.OnPushApplied(0, 1, 1);  // A retry.
  EXPECT_EQ(clocks.ClockOf(0), 2);
}

TEST(WorkerClocksTest, PartialStepsThatNeverCompleteAreBounded) {
  WorkerClocks clocks(1, 0);
  // A client that sends one of a million calls for each of 10000 steps.
  for (int64_t step = 0; step < 10000; ++step) {
    clocks.OnPushApplied(0, step, WorkerClocks::kMaxBatchesInStep);
  }
  EXPECT_EQ(clocks.ClockOf(0), 0);
  clocks.OnPushApplied(0, 20000, 1);
  EXPECT_EQ(clocks.ClockOf(0), 20001);
}

TEST(WorkerClocksTest, JoinStartsNoFurtherBehindThanTheSlowestOther) {
  WorkerClocks clocks(3, 1);
  PushSteps(clocks, 0, 10);
  PushSteps(clocks, 1, 7);
  PushSteps(clocks, 2, 4);
  // A restarted worker 2 claims 0: it goes on from the slowest other (7).
  EXPECT_EQ(clocks.Join(2, 0), 7);
  // A worker whose own count is higher keeps it.
  EXPECT_EQ(clocks.Join(0, 3), 10);
  EXPECT_EQ(clocks.Join(1, 12), 12);
}

TEST(WorkerClocksTest, ExcludedWorkersDoNotBoundTheOthers) {
  WorkerClocks clocks(3, 1);
  PushSteps(clocks, 0, 5);
  PushSteps(clocks, 1, 5);
  int released = 0;
  ASSERT_TRUE(clocks.WhenAllowed(5, [&] { ++released; }).has_value());
  // The chief declares worker 2 (at 0) lost: the waiter goes on.
  ASSERT_OK(clocks.Exclude({2}));
  EXPECT_EQ(released, 1);
  EXPECT_TRUE(clocks.Allows(6));
  // Back in the bound, it starts from the slowest live worker.
  ASSERT_OK(clocks.Exclude({}));
  EXPECT_EQ(clocks.ClockOf(2), 5);
  EXPECT_TRUE(clocks.Allows(6));
  EXPECT_FALSE(clocks.Allows(7));
}

TEST(WorkerClocksTest, NobodyLiveMeansNoBound) {
  WorkerClocks clocks(2, 0);
  ASSERT_OK(clocks.Exclude({0, 1}));
  EXPECT_TRUE(clocks.Allows(1000));
  EXPECT_EQ(clocks.WhenAllowed(1000, [] {}), std::nullopt);
}

TEST(WorkerClocksTest, JoiningWorkerLeavesTheExcludedSet) {
  WorkerClocks clocks(2, 0);
  ASSERT_OK(clocks.Exclude({1}));
  PushSteps(clocks, 0, 3);
  EXPECT_EQ(clocks.Join(1, 0), 3);
  EXPECT_FALSE(clocks.Allows(4));  // worker 1 bounds again
}

TEST(WorkerClocksTest, BadExclusionChangesNothing) {
  WorkerClocks clocks(2, 0);
  EXPECT_THAT(clocks.Exclude({0, 5}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("worker 5; this job has 2 workers")));
  EXPECT_THAT(clocks.Exclude({-1}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_FALSE(clocks.Allows(1));  // worker 0 still bounds
}

TEST(WorkerClocksTest, ChecksWorkerAndClockFromTheWire) {
  WorkerClocks clocks(2, 3);
  EXPECT_OK(clocks.Check(1, 0));
  EXPECT_OK(clocks.Check(0, WorkerClocks::kMaxClock));
  EXPECT_THAT(clocks.Check(2, 0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("worker 2; this job has 2 workers")));
  EXPECT_THAT(clocks.Check(-1, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(clocks.Check(0, -1),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(clocks.Check(0, WorkerClocks::kMaxClock + 1),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(clocks.Check(0, INT64_MAX),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(WorkerClocksTest, CancelledWaiterNeverRunsAndWaitNamesTheSlowest) {
  WorkerClocks clocks(3, 8);
  PushSteps(clocks, 0, 21);
  PushSteps(clocks, 1, 10);
  PushSteps(clocks, 2, 15);
  bool ran = false;
  std::optional<uint64_t> id = clocks.WhenAllowed(21, [&] { ran = true; });
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(clocks.DescribeWait(0, 21),
            "worker 1 is at step 10; this pull by worker 0 is for its step "
            "21 with max_staleness 8");
  EXPECT_TRUE(clocks.Cancel(*id));
  PushSteps(clocks, 1, 10);
  EXPECT_FALSE(ran);
}

TEST(WorkerClocksTest, StatsCarryClocksExclusionsAndWaits) {
  WorkerClocks clocks(2, 1);
  PushSteps(clocks, 0, 4);
  ASSERT_OK(clocks.Exclude({1}));
  clocks.CountWait(absl::Milliseconds(1500));
  StatsResponse stats;
  clocks.AddTo(stats);
  EXPECT_THAT(stats.worker_clocks(), ::testing::ElementsAre(4, 0));
  EXPECT_THAT(stats.worker_excluded(), ::testing::ElementsAre(false, true));
  EXPECT_EQ(stats.bounded_waits(), 1);
  EXPECT_DOUBLE_EQ(stats.bounded_wait_seconds(), 1.5);
  EXPECT_EQ(DescribeBoundedWaits(stats),
            "bounded staleness: 1 pulls waited for a slower worker, 1.50 s "
            "in all; worker clocks 4, 0 (excluded)");
  EXPECT_EQ(DescribeBoundedWaits(StatsResponse()), "");
}

// Workers push concurrently while pulls wait on them: every clock ends at
// the steps pushed, and every waiter is released exactly once.
TEST(WorkerClocksTest, ConcurrentPushesCountEveryStep) {
  constexpr int kWorkers = 4, kSteps = 2000;
  WorkerClocks clocks(kWorkers, 0);
  std::atomic<int> released{0}, registered{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      for (int step = 0; step < kSteps; ++step) {
        // Two calls per step, the way a large variable travels.
        clocks.OnPushApplied(w, step, 2);
        clocks.OnPushApplied(w, step, 2);
        if (step % 100 == 0 &&
            clocks.WhenAllowed(step + 1, [&] { ++released; })) {
          ++registered;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int w = 0; w < kWorkers; ++w) EXPECT_EQ(clocks.ClockOf(w), kSteps);
  EXPECT_EQ(released.load(), registered.load());
}

}  // namespace
}  // namespace psflow
