// The coordinator's long polls on a simulated clock: a finished worker's
// report (and the evaluator's status request) is held until the job has
// news for it or its wait is over, answered at once when there is news
// already, answered when the holder stops, and held once per task.
#include <atomic>
#include <memory>
#include <thread>

#include "chief/job_coordinator.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"

namespace psflow {
namespace {

using ::testing::ElementsAre;

// One answer of a held call: set once, from whichever thread answers.
class Answered {
 public:
  JobCoordinator::Answer Callback() {
    return [this](const StatusResponse& status) {
      // Exactly once: a second answer would finish an RPC twice.
      EXPECT_EQ(calls_.fetch_add(1), 0);
      status_ = status;
      done_.Notify();
    };
  }
  bool done() const { return done_.HasBeenNotified(); }
  // Blocks (real time) until answered; the state it was answered with.
  JobState Await() const {
    done_.WaitForNotification();
    return status_.state();
  }

 private:
  std::atomic<int> calls_{0};
  StatusResponse status_;
  Notification done_;
};

class JobCoordinatorHoldTest : public ::testing::Test {
 protected:
  JobCoordinatorHoldTest() : coordinator_(Options()) {
    JobSpec spec;
    spec.set_total_steps(100);
    spec.mutable_config()->mutable_training()->set_mode(ASYNC);
    coordinator_.SetSpec(spec);
    RegisterTaskRequest request;
    request.set_protocol_version(kProtocolVersion);
    request.set_task_type("worker");
    for (int i = 0; i < 2; ++i) {
      request.set_task_index(i);
      EXPECT_TRUE(coordinator_.Register(request).ok());
    }
  }

  JobCoordinator::Options Options() {
    JobCoordinator::Options options;
    options.num_workers = 2;
    options.worker_addresses = {{0, "h0:1"}, {1, "h1:1"}};
    options.evaluator_address = "h9:1";
    options.clock = &clock_;
    return options;
  }

  // Worker `index`'s report after its last step, on the current model,
  // asking to wait `wait` for news.
  ProgressReport Finished(int index,
                          absl::Duration wait = absl::Seconds(5)) const {
    ProgressReport report;
    report.set_worker_index(index);
    report.set_finished(true);
    report.set_global_step(100);
    report.set_generation(coordinator_.Status().generation());
    report.set_wait_for_news_ms(absl::ToInt64Milliseconds(wait));
    return report;
  }

  // The evaluator's status request, knowing the job's state now.
  StatusRequest EvaluatorAsks(absl::Duration wait = absl::Seconds(5)) const {
    const StatusResponse now = coordinator_.Status();
    StatusRequest request;
    request.set_task_type("evaluator");
    request.set_wait_for_change_ms(absl::ToInt64Milliseconds(wait));
    request.set_known_state(now.state());
    request.set_known_generation(now.generation());
    return request;
  }

  // Blocks until `count` threads wait on the clock, or `done()`: a hold
  // that answers before it waits fails the test instead of hanging it.
  template <typename Done>
  void AwaitWaiting(int count, Done done) const {
    while (clock_.waiters() < count && !done()) {
      absl::SleepFor(absl::Milliseconds(1));
    }
  }

  FakeClock clock_;
  JobCoordinator coordinator_;
};

TEST_F(JobCoordinatorHoldTest, AFinishedReportIsHeldUntilTheJobEnds) {
  coordinator_.StartHolding();
  Answered answered;
  coordinator_.ProgressOrHold(Finished(0), answered.Callback());
  EXPECT_EQ(coordinator_.HeldCalls(), 1);
  // The holder waits for the hold's end.
  AwaitWaiting(1, [&] { return answered.done(); });
  EXPECT_FALSE(answered.done());

  coordinator_.Succeed();
  EXPECT_EQ(answered.Await(), SUCCEEDED);
  EXPECT_EQ(coordinator_.HeldCalls(), 0);
  // The answer told worker 0 the outcome; the others have not heard it.
  EXPECT_THAT(coordinator_.WaitForOutcomeHeard(clock_.Now()),
              ElementsAre("worker-1 at h1:1", "evaluator"));
}

TEST_F(JobCoordinatorHoldTest, APauseOrARestoreIsNewsToAHeldReport) {
  coordinator_.StartHolding();
  Answered paused;
  coordinator_.ProgressOrHold(Finished(0), paused.Callback());
  ASSERT_TRUE(coordinator_.Pause("restoring"));
  EXPECT_EQ(paused.Await(), PAUSED);

  coordinator_.Resume(50);  // a new generation
  Answered before_restore;
  ProgressReport old = Finished(1);
  old.set_generation(old.generation() - 1);
  coordinator_.ProgressOrHold(old, before_restore.Callback());
  EXPECT_TRUE(before_restore.done()) << "a stale generation is news at once";
}

TEST_F(JobCoordinatorHoldTest, TheFinalEvaluationIsNoNewsToAFinishedWorker) {
  coordinator_.StartHolding();
  Answered worker, evaluator;
  coordinator_.ProgressOrHold(Finished(0), worker.Callback());
  coordinator_.StatusOrHold(EvaluatorAsks(), evaluator.Callback());
  EXPECT_EQ(coordinator_.HeldCalls(), 2);
  // TRAINING -> FINAL_EVALUATION (the evaluator has not reported yet).
  EXPECT_FALSE(coordinator_.RunFinalEvaluation(clock_.Now()).has_value());
  EXPECT_EQ(evaluator.Await(), FINAL_EVALUATION);
  EXPECT_FALSE(worker.done());
  EXPECT_EQ(coordinator_.HeldCalls(), 1);
  coordinator_.Succeed();
  EXPECT_EQ(worker.Await(), SUCCEEDED);
}

TEST_F(JobCoordinatorHoldTest, AHeldReportIsAnsweredWhenItsWaitIsOver) {
  coordinator_.StartHolding();
  Answered answered;
  coordinator_.ProgressOrHold(Finished(0, absl::Seconds(2)),
                              answered.Callback());
  AwaitWaiting(1, [&] { return answered.done(); });
  clock_.Advance(absl::Seconds(2) - absl::Milliseconds(1));
  AwaitWaiting(1, [&] { return answered.done(); });
  EXPECT_FALSE(answered.done());
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(answered.Await(), TRAINING);
  EXPECT_EQ(coordinator_.HeldCalls(), 0);
}

TEST_F(JobCoordinatorHoldTest, NoCallIsHeldLongerThanTheLimit) {
  coordinator_.StartHolding();
  Answered answered;
  coordinator_.ProgressOrHold(Finished(0, absl::Hours(1)), answered.Callback());
  AwaitWaiting(1, [&] { return answered.done(); });
  clock_.Advance(JobCoordinator::kMaxHold - absl::Milliseconds(1));
  AwaitWaiting(1, [&] { return answered.done(); });
  EXPECT_FALSE(answered.done());
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(answered.Await(), TRAINING);
}

// A later call with a shorter wait ends before the one the holder timed.
TEST_F(JobCoordinatorHoldTest, EachHeldCallEndsAtItsOwnTime) {
  coordinator_.StartHolding();
  Answered long_wait, short_wait;
  coordinator_.ProgressOrHold(Finished(0, absl::Seconds(4)),
                              long_wait.Callback());
  AwaitWaiting(1, [&] { return long_wait.done(); });
  coordinator_.ProgressOrHold(Finished(1, absl::Seconds(1)),
                              short_wait.Callback());
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(short_wait.Await(), TRAINING);
  EXPECT_FALSE(long_wait.done());
  clock_.Advance(absl::Seconds(3));
  EXPECT_EQ(long_wait.Await(), TRAINING);
}

TEST_F(JobCoordinatorHoldTest, CallsWithNewsOrNoWaitAreAnsweredAtOnce) {
  coordinator_.StartHolding();
  // Not finished, no wait asked, a failure, a paused worker, a stranger.
  ProgressReport training = Finished(0);
  training.set_finished(false);
  ProgressReport no_wait = Finished(0);
  no_wait.set_wait_for_news_ms(0);
  ProgressReport paused = Finished(1);
  paused.set_paused(true);
  ProgressReport stranger = Finished(0);
  stranger.set_worker_index(7);
  StatusRequest operator_tool = EvaluatorAsks();
  operator_tool.clear_task_type();
  StatusRequest stale = EvaluatorAsks();
  stale.set_known_state(PAUSED);
  for (const ProgressReport& report : {training, no_wait, paused, stranger}) {
    Answered answered;
    coordinator_.ProgressOrHold(report, answered.Callback());
    EXPECT_TRUE(answered.done()) << report.ShortDebugString();
  }
  for (const StatusRequest& request : {operator_tool, stale}) {
    Answered answered;
    coordinator_.StatusOrHold(request, answered.Callback());
    EXPECT_TRUE(answered.done()) << request.ShortDebugString();
  }
  EXPECT_EQ(coordinator_.HeldCalls(), 0);
  // Once the job ended, a finished worker hears it at once, and has heard.
  coordinator_.Succeed();
  Answered ended;
  coordinator_.ProgressOrHold(Finished(0), ended.Callback());
  EXPECT_TRUE(ended.done());
  EXPECT_EQ(ended.Await(), SUCCEEDED);
}

TEST_F(JobCoordinatorHoldTest, NothingIsHeldWithoutAHolder) {
  Answered answered;
  coordinator_.ProgressOrHold(Finished(0), answered.Callback());
  EXPECT_TRUE(answered.done());
  EXPECT_EQ(answered.Await(), TRAINING);
}

TEST_F(JobCoordinatorHoldTest, OneCallIsHeldPerTask) {
  coordinator_.StartHolding();
  Answered first, second, other, evaluator_first, evaluator_second;
  coordinator_.ProgressOrHold(Finished(0), first.Callback());
  coordinator_.ProgressOrHold(Finished(1), other.Callback());
  coordinator_.StatusOrHold(EvaluatorAsks(), evaluator_first.Callback());
  EXPECT_EQ(coordinator_.HeldCalls(), 3);
  // The same task again: the call it gave up is answered, the new one held.
  coordinator_.ProgressOrHold(Finished(0), second.Callback());
  coordinator_.StatusOrHold(EvaluatorAsks(), evaluator_second.Callback());
  EXPECT_TRUE(first.done());
  EXPECT_TRUE(evaluator_first.done());
  EXPECT_FALSE(second.done());
  EXPECT_FALSE(other.done());
  EXPECT_FALSE(evaluator_second.done());
  EXPECT_EQ(coordinator_.HeldCalls(), 3);
  coordinator_.Fail("stop");
  EXPECT_EQ(second.Await(), FAILED);
  EXPECT_EQ(other.Await(), FAILED);
  EXPECT_EQ(evaluator_second.Await(), FAILED);
}

TEST_F(JobCoordinatorHoldTest, StoppingTheHolderAnswersEveryHeldCall) {
  coordinator_.StartHolding();
  Answered zero, one;
  coordinator_.ProgressOrHold(Finished(0), zero.Callback());
  coordinator_.ProgressOrHold(Finished(1), one.Callback());
  AwaitWaiting(1, [&] { return zero.done() || one.done(); });
  EXPECT_FALSE(zero.done());
  EXPECT_FALSE(one.done());
  coordinator_.StopHolding();  // the clock has not moved
  EXPECT_TRUE(zero.done());
  EXPECT_TRUE(one.done());
  EXPECT_EQ(zero.Await(), TRAINING);
  EXPECT_EQ(coordinator_.HeldCalls(), 0);
  Answered later;
  coordinator_.ProgressOrHold(Finished(0), later.Callback());
  EXPECT_TRUE(later.done());
  coordinator_.StopHolding();  // idempotent
  // It may hold again (a server started anew).
  coordinator_.StartHolding();
  Answered again;
  coordinator_.ProgressOrHold(Finished(0), again.Callback());
  EXPECT_FALSE(again.done());
  EXPECT_EQ(coordinator_.HeldCalls(), 1);
  coordinator_.StopHolding();
  EXPECT_TRUE(again.done());
}

TEST_F(JobCoordinatorHoldTest, TheCoordinatorAnswersHeldCallsWhenItGoes) {
  Answered answered;
  {
    FakeClock clock;
    JobCoordinator::Options options = Options();
    options.clock = &clock;
    JobCoordinator coordinator(options);
    coordinator.SetSpec(JobSpec());
    coordinator.StartHolding();
    ProgressReport report = Finished(0);
    report.set_generation(coordinator.Status().generation());
    coordinator.ProgressOrHold(report, answered.Callback());
    EXPECT_FALSE(answered.done());
  }
  EXPECT_TRUE(answered.done());
}

// In process (LocalCoordinatorClient), the caller's thread waits on the
// clock.
TEST_F(JobCoordinatorHoldTest, InProcessAFinishedReportWaitsForTheEnd) {
  StatusResponse answer;
  std::atomic<bool> answered{false};
  std::thread worker([&] {
    answer = coordinator_.Progress(Finished(0));
    answered = true;
  });
  AwaitWaiting(1, [&] { return answered.load(); });
  EXPECT_FALSE(answered.load());
  coordinator_.Fail("a parameter server was lost");
  worker.join();
  EXPECT_EQ(answer.state(), FAILED);
  EXPECT_THAT(coordinator_.WaitForOutcomeHeard(clock_.Now()),
              ElementsAre("worker-1 at h1:1", "evaluator"));
}

TEST_F(JobCoordinatorHoldTest, InProcessTheWaitEndsOnTheClock) {
  StatusResponse worker_answer, evaluator_answer;
  std::atomic<int> answered{0};
  std::thread worker([&] {
    worker_answer = coordinator_.Progress(Finished(0));
    ++answered;
  });
  std::thread evaluator([&] {
    evaluator_answer = coordinator_.Status(EvaluatorAsks(absl::Seconds(1)));
    ++answered;
  });
  AwaitWaiting(2, [&] { return answered.load() > 0; });
  EXPECT_EQ(answered.load(), 0);
  clock_.Advance(absl::Seconds(1));
  evaluator.join();
  EXPECT_EQ(evaluator_answer.state(), TRAINING);
  EXPECT_EQ(answered.load(), 1) << "the worker waits 5 s";
  clock_.Advance(absl::Seconds(4));
  worker.join();
  EXPECT_EQ(worker_answer.state(), TRAINING);
}

}  // namespace
}  // namespace psflow
