#include "chief/job_coordinator.h"

#include <atomic>
#include <thread>

#include "common/clock.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"

namespace psflow {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

JobSpec Spec(UpdateMode mode, int64_t total_steps = 100) {
  JobSpec spec;
  spec.set_total_steps(total_steps);
  spec.mutable_config()->mutable_training()->set_mode(mode);
  return spec;
}

JobCoordinator::Options TwoWorkers(absl::Duration heartbeat = absl::Seconds(60),
                                   Clock* clock = nullptr) {
  JobCoordinator::Options options;
  if (clock != nullptr) options.clock = clock;
  options.num_workers = 2;
  options.worker_addresses = {{0, "h0:1"}, {1, "h1:1"}};
  options.heartbeat_timeout = heartbeat;
  return options;
}

RegisterTaskRequest Worker(int index) {
  RegisterTaskRequest request;
  request.set_protocol_version(kProtocolVersion);
  request.set_task_type("worker");
  request.set_task_index(index);
  return request;
}

RegisterTaskRequest Evaluator() {
  RegisterTaskRequest request;
  request.set_protocol_version(kProtocolVersion);
  request.set_task_type("evaluator");
  return request;
}

ProgressReport Report(int index, int64_t step, bool finished = false) {
  ProgressReport report;
  report.set_worker_index(index);
  report.set_global_step(step);
  report.set_finished(finished);
  return report;
}

// A worker's report, on the coordinator's current model generation (as
// the trainer sends them).
StatusResponse Progress(JobCoordinator& c, ProgressReport report) {
  report.set_generation(c.Status().generation());
  return c.Progress(report);
}

// psctl ckpt restore requests hold open calls while they wait: few may.
TEST(JobCoordinatorTest, OnlyAFewRestoresMayWait) {
  JobCoordinator coordinator(TwoWorkers());
  std::vector<absl::Status> answers;
  for (size_t i = 0; i <= JobCoordinator::kMaxPendingRestores; ++i) {
    coordinator.RequestRestore(JobCoordinator::RestoreRequest{
        "/ckpt", [&answers](absl::StatusOr<int64_t> step) {
          answers.push_back(step.status());
        }});
  }
  // The one beyond the limit is answered at once; the others wait.
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].code(), absl::StatusCode::kResourceExhausted);
  for (size_t i = 0; i < JobCoordinator::kMaxPendingRestores; ++i) {
    EXPECT_TRUE(coordinator.TakeRestoreRequest().has_value());
  }
  EXPECT_FALSE(coordinator.TakeRestoreRequest().has_value());
}

// A restore request holds an open call (the server's drain waits for it):
// once the job's outcome is decided no loop serves restores, so the ones
// waiting are answered then, and later ones at once, naming why.
TEST(JobCoordinatorTest, RestoresAreRefusedOnceTheJobEnded) {
  for (const bool succeed : {true, false}) {
    JobCoordinator coordinator(TwoWorkers());
    coordinator.SetSpec(Spec(ASYNC));
    std::vector<absl::Status> answers;
    auto request = [&](const std::string& path) {
      coordinator.RequestRestore(JobCoordinator::RestoreRequest{
          path, [&answers](absl::StatusOr<int64_t> step) {
            answers.push_back(step.status());
          }});
    };
    request("/ckpt/ckpt-1");
    request("/ckpt/ckpt-2");
    ASSERT_THAT(answers, IsEmpty()) << "they wait while the job runs";
    if (succeed) {
      coordinator.Succeed();
    } else {
      coordinator.Fail("worker-0 failed: NaN loss");
    }
    ASSERT_EQ(answers.size(), 2u) << "the waiting ones, as the job ended";
    request("/ckpt/ckpt-3");  // during or after the chief's Finish
    ASSERT_EQ(answers.size(), 3u) << "a later one, at once";
    EXPECT_EQ(coordinator.PendingRestores(), 0);
    for (const absl::Status& answer : answers) {
      EXPECT_THAT(answer, StatusIs(absl::StatusCode::kFailedPrecondition,
                                   HasSubstr("the job has ended")));
      EXPECT_THAT(answer.message(),
                  HasSubstr("start the job again with the same checkpoint "
                            "directory"));
    }
    EXPECT_THAT(answers[2].message(),
                HasSubstr(succeed ? "SUCCEEDED: job finished"
                                  : "FAILED: worker-0 failed: NaN loss"));
  }
}

// A worker's error ends the job before the chief's Fail(): restores
// waiting then are refused as the chief ends the job, not left to its stop.
TEST(JobCoordinatorTest, RestoresWaitingWhenAWorkerFailedTheJobAreRefused) {
  JobCoordinator coordinator(TwoWorkers());
  coordinator.SetSpec(Spec(ASYNC));
  std::vector<absl::Status> answers;
  coordinator.RequestRestore(JobCoordinator::RestoreRequest{
      "/ckpt/ckpt-1", [&answers](absl::StatusOr<int64_t> step) {
        answers.push_back(step.status());
      }});
  ProgressReport report = Report(1, 3);
  report.set_error("out of memory");
  ASSERT_EQ(Progress(coordinator, report).state(), FAILED);
  coordinator.Fail("the chief ends the job");  // as Finish does
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_THAT(answers[0], StatusIs(absl::StatusCode::kFailedPrecondition,
                                   HasSubstr("worker-1 at h1:1 failed")));
  EXPECT_EQ(coordinator.PendingRestores(), 0);
}

// The server stops holding calls before it drains: restore requests still
// waiting then (the job did not end: a chief cut short) are answered too.
TEST(JobCoordinatorTest, RestoresWaitingWhenTheCoordinatorStopsAreAnswered) {
  JobCoordinator coordinator(TwoWorkers());
  coordinator.SetSpec(Spec(ASYNC));
  std::vector<absl::Status> answers;
  auto request = [&] {
    coordinator.RequestRestore(JobCoordinator::RestoreRequest{
        "/ckpt/ckpt-1", [&answers](absl::StatusOr<int64_t> step) {
          answers.push_back(step.status());
        }});
  };
  request();
  coordinator.StartHolding();
  coordinator.StopHolding();
  ASSERT_EQ(answers.size(), 1u);
  request();
  ASSERT_EQ(answers.size(), 2u);
  for (const absl::Status& answer : answers) {
    EXPECT_THAT(answer, StatusIs(absl::StatusCode::kFailedPrecondition,
                                 HasSubstr("the chief is stopping")));
  }
}

TEST(JobCoordinatorTest, RegistrationWaitsForTheSpec) {
  JobCoordinator c(TwoWorkers());
  EXPECT_THAT(c.Register(Worker(0)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("still initializing")));
  c.SetSpec(Spec(ASYNC, 42));
  ASSERT_OK_AND_ASSIGN(JobSpec spec, c.Register(Worker(0)));
  EXPECT_EQ(spec.total_steps(), 42);
}

TEST(JobCoordinatorTest, StrangersAndOtherVersionsAreRefused) {
  JobCoordinator c(TwoWorkers());
  c.SetSpec(Spec(ASYNC));
  EXPECT_THAT(c.Register(Worker(5)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("worker 5 is not in this job's cluster")));
  RegisterTaskRequest old = Worker(0);
  old.set_protocol_version(kProtocolVersion + 1);
  EXPECT_THAT(c.Register(old), StatusIs(absl::StatusCode::kFailedPrecondition));
}

// Waits run on a simulated clock: minutes of timeouts take no real time.
FakeClock& SimulatedClock() {
  static FakeClock* const clock = [] {
    auto* clock = new FakeClock();
    clock->SetAutoAdvance(true);
    return clock;
  }();
  return *clock;
}

TEST(JobCoordinatorTest, WaitForWorkersNamesTheMissingOnes) {
  FakeClock& clock = SimulatedClock();
  JobCoordinator c(TwoWorkers(absl::Seconds(60), &clock));
  c.SetSpec(Spec(ASYNC));
  ASSERT_OK(c.Register(Worker(0)));
  EXPECT_THAT(c.WaitForWorkers(clock.Now() + absl::Minutes(2)),
              ElementsAre("worker-1 at h1:1"));
  ASSERT_OK(c.Register(Worker(1)));
  EXPECT_THAT(c.WaitForWorkers(clock.Now()), IsEmpty());
}

TEST(JobCoordinatorTest, TrainingEndsWhenEveryWorkerFinished) {
  FakeClock& clock = SimulatedClock();
  JobCoordinator c(TwoWorkers(absl::Seconds(60), &clock));
  c.SetSpec(Spec(ASYNC));
  ASSERT_OK(c.Register(Worker(0)));
  ASSERT_OK(c.Register(Worker(1)));
  Progress(c, Report(0, 100, /*finished=*/true));
  // Worker 1, silent for 50 of its 60 s, is still training.
  EXPECT_FALSE(c.WaitForTrainingEnd(clock.Now() + absl::Seconds(50)));
  EXPECT_EQ(c.state(), TRAINING);
  Progress(c, Report(1, 101, /*finished=*/true));
  EXPECT_TRUE(c.WaitForTrainingEnd(clock.Now() + absl::Seconds(5)));
  EXPECT_EQ(c.state(), TRAINING);
  EXPECT_EQ(c.Status().global_step(), 101);
}

// Saves due every 300 steps: the workers are told to report each multiple
// at once, and the chief's wait ends as soon as a report reaches the next
// one (not at its next tick).
TEST(JobCoordinatorTest, AWatchedStepIsToldToWorkersAndEndsTheWait) {
  FakeClock& clock = SimulatedClock();
  JobCoordinator c(TwoWorkers(absl::Seconds(60), &clock));
  c.SetSpec(Spec(ASYNC, 1000));
  ASSERT_OK(c.Register(Worker(0)));
  ASSERT_OK(c.Register(Worker(1)));
  c.WatchForStep(300, 300);
  EXPECT_EQ(Progress(c, Report(0, 120)).report_every_steps(), 300);
  // Not reached: the wait lasts until its deadline (simulated time).
  absl::Time before = clock.Now();
  EXPECT_FALSE(c.WaitForTrainingEnd(before + absl::Seconds(30)));
  EXPECT_GE(clock.Now() - before, absl::Seconds(30));
  Progress(c, Report(1, 301));
  before = clock.Now();
  EXPECT_FALSE(c.WaitForTrainingEnd(before + absl::Seconds(30)));
  EXPECT_LT(clock.Now() - before, absl::Seconds(30));
  EXPECT_EQ(c.state(), TRAINING);
  c.WatchForStep(0, 0);
  EXPECT_EQ(Progress(c, Report(0, 320)).report_every_steps(), 0);
  // Only while training: a paused job's workers report nothing early.
  c.WatchForStep(600, 300);
  ASSERT_TRUE(c.Pause("restoring"));
  EXPECT_EQ(Progress(c, Report(0, 320)).report_every_steps(), 0);
}

TEST(JobCoordinatorTest, AWorkerErrorFailsTheJob) {
  JobCoordinator c(TwoWorkers());
  c.SetSpec(Spec(ASYNC));
  ProgressReport report = Report(1, 3);
  report.set_error("out of memory");
  StatusResponse status = Progress(c, report);
  EXPECT_EQ(status.state(), FAILED);
  EXPECT_THAT(status.message(), HasSubstr("worker-1 at h1:1 failed: out of"));
  EXPECT_TRUE(c.WaitForTrainingEnd(absl::Now()));
}

// A check of the tasks every `step` of the clock, worker 0 reporting before
// each, until worker 1 (silent) is declared lost; how many checks it took.
int ChecksUntilWorkerOneIsLost(JobCoordinator& c, FakeClock& clock,
                               absl::Duration step) {
  int checks = 0;
  for (int64_t i = 0; c.CountWorkers().lost == 0 && checks < 1000; ++i) {
    Progress(c, Report(0, i));
    clock.Advance(step);
    EXPECT_FALSE(c.WaitForTrainingEnd(clock.Now()));
    ++checks;
  }
  return checks;
}

TEST(JobCoordinatorTest, AsyncContinuesWithoutALostWorker) {
  FakeClock clock;
  JobCoordinator c(TwoWorkers(absl::Seconds(60), &clock));
  c.SetSpec(Spec(ASYNC));
  ASSERT_OK(c.Register(Worker(0)));
  ASSERT_OK(c.Register(Worker(1)));
  // Lost at the first check 60 s after it was last heard.
  EXPECT_EQ(ChecksUntilWorkerOneIsLost(c, clock, absl::Milliseconds(500)), 120);
  EXPECT_EQ(c.CountWorkers().lost, 1);
  Progress(c, Report(0, 100, true));
  EXPECT_TRUE(c.WaitForTrainingEnd(clock.Now()));
  EXPECT_EQ(c.state(), TRAINING) << c.Status().message();
}

// The last worker of an async or bounded job lost: the model on the
// servers is intact, so the chief waits for a restarted worker as a sync
// job does, and fails only once none came back.
TEST(JobCoordinatorTest, AsyncWaitsForAReplacementWhenNoWorkerIsLeft) {
  for (UpdateMode mode : {ASYNC, BOUNDED}) {
    SCOPED_TRACE(UpdateMode_Name(mode));
    FakeClock& clock = SimulatedClock();
    JobCoordinator::Options options = TwoWorkers(absl::Seconds(60), &clock);
    options.worker_replacement_timeout = absl::Minutes(4);
    JobCoordinator c(options);
    c.SetSpec(Spec(mode));
    ASSERT_OK(c.Register(Worker(0)));
    ASSERT_OK(c.Register(Worker(1)));
    const absl::Time start = clock.Now();
    // Both silent: lost after 60 s, then 4 minutes waited for.
    EXPECT_FALSE(c.WaitForTrainingEnd(start + absl::Minutes(4)));
    EXPECT_EQ(c.state(), TRAINING) << c.Status().message();
    EXPECT_EQ(c.CountWorkers().lost, 2);
    // One comes back in time: training goes on.
    ASSERT_OK(c.Register(Worker(1)));
    Progress(c, Report(1, 10));
    clock.Advance(absl::Seconds(1));
    EXPECT_FALSE(c.WaitForTrainingEnd(clock.Now()));
    EXPECT_EQ(c.state(), TRAINING) << c.Status().message();
    // Lost again, and this time nobody returns.
    const absl::Time again = clock.Now();
    EXPECT_TRUE(c.WaitForTrainingEnd(again + absl::Hours(1)));
    EXPECT_EQ(c.state(), FAILED);
    // Its last report came a second before: lost 59 s on, then 4 minutes.
    EXPECT_GE(clock.Now() - again, absl::Minutes(5) - absl::Seconds(2));
    EXPECT_LT(clock.Now() - again, absl::Minutes(5) + absl::Seconds(3));
    EXPECT_THAT(c.Status().message(),
                AllOf(HasSubstr("no worker is left to train"),
                      HasSubstr("did not come back within 4m "
                                "(chief --worker_replacement_timeout_s)")));
  }
}

TEST(JobCoordinatorTest, SyncFailsWhenALostWorkerDoesNotComeBack) {
  FakeClock& clock = SimulatedClock();
  JobCoordinator::Options options = TwoWorkers(absl::Seconds(60), &clock);
  options.worker_replacement_timeout = absl::Minutes(4);
  JobCoordinator c(options);
  c.SetSpec(Spec(SYNC));
  ASSERT_OK(c.Register(Worker(0)));
  ASSERT_OK(c.Register(Worker(1)));
  const absl::Time start = clock.Now();
  EXPECT_TRUE(c.WaitForTrainingEnd(start + absl::Hours(1)));
  EXPECT_EQ(c.state(), FAILED);
  // Lost after 60 s of silence, then 4 minutes waited for.
  EXPECT_GT(clock.Now() - start, absl::Minutes(5));
  EXPECT_LT(clock.Now() - start, absl::Minutes(5) + absl::Seconds(3));
  EXPECT_THAT(c.Status().message(),
              HasSubstr("stopped reporting (no heartbeat for 1m); a sync "
                        "job cannot continue: each step needs 2 workers"));
  EXPECT_THAT(c.Status().message(),
              HasSubstr("did not come back within 4m "
                        "(chief --worker_replacement_timeout_s)"));
}

// Every worker is needed: a lost one is waited for (Kubernetes restarts
// it), and the job goes on once it registers again.
TEST(JobCoordinatorTest, SyncWaitsForALostWorkersReplacement) {
  FakeClock clock;
  JobCoordinator::Options options = TwoWorkers(absl::Seconds(60), &clock);
  options.worker_replacement_timeout = absl::Minutes(10);
  JobCoordinator c(options);
  c.SetSpec(Spec(SYNC));
  ASSERT_OK(c.Register(Worker(0)));
  ASSERT_OK(c.Register(Worker(1)));
  // Worker 0 keeps reporting; worker 1 goes silent until it is lost.
  EXPECT_EQ(ChecksUntilWorkerOneIsLost(c, clock, absl::Seconds(1)), 60);
  ASSERT_EQ(c.CountWorkers().lost, 1);
  // Waiting, 9 minutes past the heartbeat timeout, not failed.
  for (int i = 0; i < 9 * 60; ++i) {
    Progress(c, Report(0, 100));
    clock.Advance(absl::Seconds(1));
    EXPECT_FALSE(c.WaitForTrainingEnd(clock.Now()));
  }
  EXPECT_EQ(c.state(), TRAINING) << c.Status().message();
  // Its replacement registers and the job finishes.
  ASSERT_OK(c.Register(Worker(1)));
  Progress(c, Report(0, 100, true));
  Progress(c, Report(1, 100, true));
  EXPECT_TRUE(c.WaitForTrainingEnd(clock.Now()));
  EXPECT_EQ(c.state(), TRAINING);  // over, not failed
}

TEST(JobCoordinatorTest, SyncWithBackupsContinuesWithoutALostWorker) {
  FakeClock clock;
  JobCoordinator c(TwoWorkers(absl::Seconds(60), &clock));
  JobSpec spec = Spec(SYNC);
  spec.mutable_ps_config()->set_replicas_to_aggregate(1);
  c.SetSpec(spec);
  ASSERT_OK(c.Register(Worker(0)));
  ASSERT_OK(c.Register(Worker(1)));
  // Worker 0 keeps reporting; worker 1 goes silent until it is lost.
  EXPECT_EQ(ChecksUntilWorkerOneIsLost(c, clock, absl::Seconds(1)), 60);
  EXPECT_EQ(c.CountWorkers().lost, 1);
  EXPECT_EQ(c.state(), TRAINING) << c.Status().message();
  // It comes back (a restart registers again) and the job finishes.
  ASSERT_OK(c.Register(Worker(1)));
  Progress(c, Report(0, 100, true));
  Progress(c, Report(1, 100, true));
  EXPECT_TRUE(c.WaitForTrainingEnd(clock.Now()));
  EXPECT_EQ(c.state(), TRAINING);  // over, not failed
}

// The chief itself stopped (SIGSTOP, a starved machine) for longer than
// the heartbeat timeout: the workers' silence while it did not run is not
// theirs, and nobody is declared lost for it.
TEST(JobCoordinatorTest, TheChiefsOwnStallIsNotTheWorkersSilence) {
  FakeClock& clock = SimulatedClock();
  JobCoordinator c(TwoWorkers(absl::Seconds(60), &clock));
  c.SetSpec(Spec(ASYNC));
  ASSERT_OK(c.Register(Worker(0)));
  ASSERT_OK(c.Register(Worker(1)));
  EXPECT_FALSE(c.WaitForTrainingEnd(clock.Now()));  // a check
  // Nothing runs for 2 minutes: no report, no check (as while stopped).
  clock.Advance(absl::Minutes(2));
  EXPECT_FALSE(c.WaitForTrainingEnd(clock.Now()));
  EXPECT_EQ(c.CountWorkers().lost, 0);
  EXPECT_EQ(c.state(), TRAINING);
  // Silence while the chief runs still counts (then, with no worker left,
  // it waits for a restarted one).
  EXPECT_FALSE(c.WaitForTrainingEnd(clock.Now() + absl::Minutes(2)));
  EXPECT_EQ(c.CountWorkers().lost, 2);
}

// After a stall, the queued reports arrive in any order: one task heard
// before the chief's next check does not make the others, whose reports
// are still queued, lost.
TEST(JobCoordinatorTest, AStallForgivesTasksNotHeardYetWhenOthersWere) {
  FakeClock clock;
  JobCoordinator c(TwoWorkers(absl::Seconds(60), &clock));
  c.SetSpec(Spec(ASYNC));
  ASSERT_OK(c.Register(Worker(0)));
  ASSERT_OK(c.Register(Worker(1)));
  EXPECT_FALSE(c.WaitForTrainingEnd(clock.Now()));  // a check
  clock.Advance(absl::Minutes(2));                  // stopped: no check
  Progress(c, Report(0, 10));  // worker 0's queued report comes first
  EXPECT_FALSE(c.WaitForTrainingEnd(clock.Now()));
  EXPECT_EQ(c.CountWorkers().lost, 0);
  EXPECT_EQ(c.state(), TRAINING);
}

TEST(JobCoordinatorTest, PauseWaitsForWorkersAndResumeStartsANewGeneration) {
  JobCoordinator c(TwoWorkers());
  c.SetSpec(Spec(ASYNC));
  ASSERT_OK(c.Register(Worker(0)));
  ASSERT_OK(c.Register(Worker(1)));
  Progress(c, Report(0, 50));
  const int64_t generation = c.Status().generation();
  ASSERT_TRUE(c.Pause("restoring"));
  EXPECT_FALSE(c.Pause("again"));
  EXPECT_EQ(c.Status().state(), PAUSED);
  EXPECT_FALSE(c.WaitForTrainingEnd(absl::Now() + absl::Milliseconds(10)));
  ProgressReport paused = Report(0, 50);
  paused.set_paused(true);
  paused.set_generation(generation);
  c.Progress(paused);
  EXPECT_THAT(c.WaitForWorkersPaused(absl::Now() + absl::Milliseconds(50)),
              ElementsAre("worker-1 at h1:1"));
  paused.set_worker_index(1);
  c.Progress(paused);
  EXPECT_THAT(c.WaitForWorkersPaused(absl::Now() + absl::Seconds(5)),
              IsEmpty());
  c.Resume(20);
  StatusResponse status = c.Status();
  EXPECT_EQ(status.state(), TRAINING);
  EXPECT_EQ(status.global_step(), 20);
  EXPECT_NE(status.generation(), generation);
  // Reports of the old generation no longer move the global step.
  ProgressReport old = Report(0, 60);
  old.set_generation(generation);
  c.Progress(old);
  EXPECT_EQ(c.Status().global_step(), 20);
}

// A worker still loading its data has not pulled anything: a pause does
// not wait for it (it hears of the pause before its first pull).
TEST(JobCoordinatorTest, APauseDoesNotWaitForAPreparingWorker) {
  JobCoordinator c(TwoWorkers());
  c.SetSpec(Spec(ASYNC));
  ASSERT_OK(c.Register(Worker(0)));
  ASSERT_OK(c.Register(Worker(1)));
  Progress(c, Report(0, 50));
  ProgressReport preparing;
  preparing.set_worker_index(1);
  preparing.set_preparing(true);
  c.Progress(preparing);
  ASSERT_TRUE(c.Pause("restoring"));
  EXPECT_THAT(c.WaitForWorkersPaused(absl::Now() + absl::Milliseconds(50)),
              ElementsAre("worker-0 at h0:1"));
  // Once it reports that it steps, it is waited for like the others.
  Progress(c, Report(1, 0));
  EXPECT_THAT(c.WaitForWorkersPaused(absl::Now() + absl::Milliseconds(50)),
              ElementsAre("worker-0 at h0:1", "worker-1 at h1:1"));
}

TEST(JobCoordinatorTest, FinalEvaluationIsAwaitedWithADeadline) {
  JobCoordinator c(TwoWorkers());
  c.SetSpec(Spec(ASYNC));
  EXPECT_FALSE(
      c.RunFinalEvaluation(absl::Now() + absl::Milliseconds(30)).has_value());
  EXPECT_EQ(c.state(), FINAL_EVALUATION);
  EvaluationReport report;
  report.set_accuracy(0.9);
  report.set_final(true);
  ASSERT_OK(c.Evaluation(report));
  auto final_eval = c.RunFinalEvaluation(absl::Now());
  ASSERT_TRUE(final_eval.has_value());
  EXPECT_EQ(final_eval->accuracy(), 0.9);
  c.Succeed();
  EXPECT_EQ(c.state(), SUCCEEDED);
  c.Fail("too late");
  EXPECT_EQ(c.state(), SUCCEEDED) << "a finished job stays finished";
}

// The final evaluation waits in slices (the chief checks its servers
// between them): a wait ends at its wake time with kWaiting, and the
// evaluator's report, once it came, with kReceived.
TEST(JobCoordinatorTest, TheFinalEvaluationIsAwaitedInSlices) {
  FakeClock clock;
  JobCoordinator c(TwoWorkers(/*heartbeat=*/absl::Seconds(60), &clock));
  c.SetSpec(Spec(ASYNC));
  ASSERT_OK(c.Register(Evaluator()));
  const absl::Time deadline = clock.Now() + absl::Minutes(2);
  EXPECT_EQ(c.AwaitFinalEvaluation(deadline, clock.Now()),
            JobCoordinator::FinalEvaluationWait::kWaiting);
  EXPECT_EQ(c.state(), FINAL_EVALUATION);
  EvaluationReport report;
  report.set_final(true);
  report.set_accuracy(0.5);
  ASSERT_OK(c.Evaluation(report));
  EXPECT_EQ(c.AwaitFinalEvaluation(deadline, clock.Now()),
            JobCoordinator::FinalEvaluationWait::kReceived);
  clock.SetTime(deadline);
  EXPECT_EQ(c.AwaitFinalEvaluation(deadline, deadline),
            JobCoordinator::FinalEvaluationWait::kReceived)
      << "a report that came stays received";
}

// A server lost after training: the chief pauses the final evaluation,
// restores the final checkpoint and resumes it with a new generation. An
// evaluation of the live model whose pulls may have met the restore (made
// before it, or reported while it runs) is refused; a checkpoint's
// evaluation (no model generation) is not affected.
TEST(JobCoordinatorTest,
     AFinalEvaluationPausedForARestoreResumesAndRefusesOld) {
  JobCoordinator c(TwoWorkers());
  c.SetSpec(Spec(ASYNC, /*total_steps=*/10));
  c.BeginFinalEvaluation();
  EXPECT_EQ(c.state(), FINAL_EVALUATION);
  const int64_t before = c.Status().generation();
  EvaluationReport live;
  live.set_final(true);
  live.set_model_generation(before);
  ASSERT_TRUE(c.Pause("restoring the final checkpoint"));
  EXPECT_EQ(c.state(), PAUSED);
  EXPECT_THAT(c.Evaluation(live),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("is restoring")));
  EvaluationReport from_checkpoint;
  from_checkpoint.set_global_step(5);
  EXPECT_OK(c.Evaluation(from_checkpoint));
  c.Resume(10);
  EXPECT_EQ(c.state(), FINAL_EVALUATION);
  EXPECT_EQ(c.Status().generation(), before + 1);
  EXPECT_EQ(c.Status().global_step(), 10);
  EXPECT_THAT(c.Evaluation(live),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("restored")));
  EXPECT_FALSE(c.RunFinalEvaluation(absl::Now()).has_value())
      << "a refused report is not the final evaluation";
  live.set_model_generation(before + 1);
  live.set_accuracy(0.75);
  ASSERT_OK(c.Evaluation(live));
  std::optional<EvaluationReport> final_eval =
      c.RunFinalEvaluation(absl::Now());
  ASSERT_TRUE(final_eval.has_value());
  EXPECT_EQ(final_eval->accuracy(), 0.75);
}

// Training pauses and resumes to TRAINING, as before.
TEST(JobCoordinatorTest, APauseDuringTrainingResumesTraining) {
  JobCoordinator c(TwoWorkers());
  c.SetSpec(Spec(ASYNC));
  ASSERT_TRUE(c.Pause("restoring"));
  c.Resume(3);
  EXPECT_EQ(c.state(), TRAINING);
  c.Succeed();
  EXPECT_FALSE(c.Pause("too late")) << "an ended job does not pause";
}

// The evaluator's liveness is tracked like a worker's: the final
// evaluation is not awaited from an evaluator that never joined or fell
// silent, however long the deadline.
TEST(JobCoordinatorTest, ALostOrAbsentEvaluatorIsNotWaitedFor) {
  {
    // Never joined: waited for one heartbeat timeout, not the deadline.
    FakeClock& clock = SimulatedClock();
    JobCoordinator c(TwoWorkers(/*heartbeat=*/absl::Seconds(60), &clock));
    c.SetSpec(Spec(ASYNC));
    const absl::Time start = clock.Now();
    EXPECT_FALSE(c.RunFinalEvaluation(absl::InfiniteFuture()).has_value());
    EXPECT_GE(clock.Now() - start, absl::Seconds(60));
    EXPECT_LT(clock.Now() - start, absl::Seconds(62));
  }
  FakeClock clock;
  JobCoordinator c(TwoWorkers(/*heartbeat=*/absl::Seconds(60), &clock));
  c.SetSpec(Spec(ASYNC));
  ASSERT_OK(c.Register(Evaluator()));
  // While it keeps asking (each second), it is waited for up to the
  // deadline: 5 minutes, five heartbeat timeouts.
  const absl::Time start = clock.Now();
  std::atomic<bool> done{false};
  std::thread chief([&] {
    EXPECT_FALSE(c.RunFinalEvaluation(start + absl::Minutes(5)).has_value());
    done = true;
  });
  StatusRequest request;
  request.set_task_type("evaluator");
  // Until the deadline the chief's thread waits on the clock (it can end
  // only there), so there is always a waiter to advance past.
  while (clock.Now() < start + absl::Minutes(5)) {
    clock.AwaitWaiters(1);
    c.Status(request);
    clock.Advance(absl::Seconds(1));
  }
  chief.join();
  EXPECT_TRUE(done);
  EXPECT_GE(clock.Now() - start, absl::Minutes(5));
  // Silent now: given up on after a heartbeat timeout, not an hour.
  clock.SetAutoAdvance(true);
  const absl::Time silent_since = clock.Now();
  EXPECT_FALSE(c.RunFinalEvaluation(clock.Now() + absl::Hours(1)).has_value());
  EXPECT_LT(clock.Now() - silent_since, absl::Seconds(62));
}

// Workers that trained their last step stay for the job's end (a fault
// in the final checkpoint may need them to train again): the chief waits,
// bounded, for them to hear it, as for every running task.
TEST(JobCoordinatorTest, FinishedWorkersHearTheOutcomeBeforeTheChiefStops) {
  JobCoordinator c(TwoWorkers());
  c.SetSpec(Spec(ASYNC));
  ASSERT_OK(c.Register(Worker(0)));
  ASSERT_OK(c.Register(Worker(1)));
  Progress(c, Report(0, 10, /*finished=*/true));
  Progress(c, Report(1, 10, /*finished=*/true));
  c.Succeed();
  EXPECT_THAT(c.WaitForOutcomeHeard(absl::Now()),
              ElementsAre("worker-0 at h0:1", "worker-1 at h1:1"));
  EXPECT_EQ(Progress(c, Report(0, 10, /*finished=*/true)).state(), SUCCEEDED);
  EXPECT_EQ(Progress(c, Report(1, 10, /*finished=*/true)).state(), SUCCEEDED);
  EXPECT_THAT(c.WaitForOutcomeHeard(absl::InfiniteFuture()), IsEmpty());
}

// A restore after every worker's last step (a parameter server lost during
// the final checkpoint) moves training back: "finished" reported for the
// replaced model no longer ends training, nor shields a silent worker.
TEST(JobCoordinatorTest, FinishingAnEarlierGenerationDoesNotEndTraining) {
  JobCoordinator c(TwoWorkers(/*heartbeat=*/absl::Milliseconds(200)));
  c.SetSpec(Spec(SYNC, 100));
  ASSERT_OK(c.Register(Worker(0)));
  ASSERT_OK(c.Register(Worker(1)));
  Progress(c, Report(0, 100, /*finished=*/true));
  Progress(c, Report(1, 100, /*finished=*/true));
  ASSERT_TRUE(c.WaitForTrainingEnd(absl::Now()));
  ASSERT_TRUE(c.Pause("a parameter server was lost"));
  EXPECT_THAT(c.WaitForWorkersPaused(absl::Now()), IsEmpty())
      << "finished workers are not stepping: nothing to pause";
  c.Resume(70);
  EXPECT_EQ(c.Status().global_step(), 70);
  EXPECT_FALSE(c.WaitForTrainingEnd(absl::Now()));
  Progress(c, Report(0, 100, /*finished=*/true));
  EXPECT_FALSE(c.WaitForTrainingEnd(absl::Now())) << "worker 1 trains still";
  Progress(c, Report(1, 100, /*finished=*/true));
  EXPECT_TRUE(c.WaitForTrainingEnd(absl::Now()));
  EXPECT_EQ(c.state(), TRAINING);
}

// A restarted chief restores the model only at the end of its start-up:
// workers that went on training meanwhile, even under the generation it
// answered with then, trained a model the restore replaces. Their
// "finished" must not end the restored job at once.
TEST(JobCoordinatorTest, ReportsMadeWhileTheChiefInitializedAreStale) {
  JobCoordinator c(TwoWorkers());
  const int64_t initializing = c.Status().generation();
  Progress(c, Report(0, 3000, /*finished=*/true));
  Progress(c, Report(1, 3000, /*finished=*/true));
  c.SetSpec(Spec(ASYNC, 3000));
  EXPECT_NE(c.Status().generation(), initializing);
  EXPECT_FALSE(c.WaitForTrainingEnd(absl::Now()));
  Progress(c, Report(0, 3000, /*finished=*/true));
  Progress(c, Report(1, 3000, /*finished=*/true));
  EXPECT_TRUE(c.WaitForTrainingEnd(absl::Now()));
}

// The job fails while the chief is still initializing: the tasks that
// already asked to join (they retry) hear it before the chief stops, so
// none waits out its startup deadline against a chief that is gone.
TEST(JobCoordinatorTest, TasksWaitingToJoinHearAFailureAtStart) {
  JobCoordinator c(TwoWorkers());
  const RegisterTaskRequest evaluator = Evaluator();
  EXPECT_THAT(c.Register(Worker(1)),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(c.Register(evaluator),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(c.Register(Worker(7)),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  c.Fail("creating these variables needs 66840264120 bytes");
  // Worker 0 has not asked yet: while the job starts, it is waited for too.
  EXPECT_THAT(c.WaitForOutcomeHeard(absl::Now()),
              ElementsAre("worker-0 at h0:1", "worker-1 at h1:1", "evaluator"))
      << "only the job's own tasks are remembered";
  EXPECT_THAT(c.Register(Worker(1)),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("66840264120")));
  std::thread late([&] {
    EXPECT_THAT(c.Register(evaluator), StatusIs(absl::StatusCode::kAborted));
    EXPECT_THAT(c.Register(Worker(0)), StatusIs(absl::StatusCode::kAborted));
  });
  EXPECT_THAT(c.WaitForOutcomeHeard(absl::InfiniteFuture()), IsEmpty());
  late.join();
}

TEST(JobCoordinatorTest, AFailedJobWaitsUntilRunningTasksHeardIt) {
  JobCoordinator c(TwoWorkers());
  c.SetSpec(Spec(ASYNC));
  ASSERT_OK(c.Register(Worker(0)));
  ASSERT_OK(c.Register(Worker(1)));
  const RegisterTaskRequest evaluator = Evaluator();
  ASSERT_OK(c.Register(evaluator));
  Progress(c, Report(0, 5));
  Progress(c, Report(1, 5));
  c.Fail("a parameter server was lost");
  EXPECT_THAT(c.WaitForOutcomeHeard(absl::Now()),
              ::testing::ElementsAre("worker-0 at h0:1", "worker-1 at h1:1",
                                     "evaluator"));
  // A status request before the end does not count; one after it does.
  StatusRequest asks_as_evaluator;
  asks_as_evaluator.set_task_type("evaluator");
  EXPECT_EQ(c.Status(asks_as_evaluator).state(), FAILED);
  EXPECT_EQ(Progress(c, Report(1, 5)).state(), FAILED);
  StatusRequest asks_as_worker_0;
  asks_as_worker_0.set_task_type("worker");
  asks_as_worker_0.set_task_index(0);
  std::thread late(
      [&] { EXPECT_EQ(c.Status(asks_as_worker_0).state(), FAILED); });
  // Returns once worker 0 asked: progress, not a clock.
  EXPECT_THAT(c.WaitForOutcomeHeard(absl::InfiniteFuture()),
              ::testing::IsEmpty());
  late.join();
}

// A job that fails in its first second (a diverging model) may end before
// slower tasks started: they are waited for (bounded) to hear the outcome
// rather than left waiting for a chief that is gone. Once start-up is
// over, a worker never heard from is missing, not late; an evaluator is
// never part of the start-up, so it may still be starting.
TEST(JobCoordinatorTest, AJobFailingAtStartWaitsForTasksNotHeardFromYet) {
  JobCoordinator::Options options = TwoWorkers();
  options.evaluator_address = "e:1";
  JobCoordinator c(options);
  c.SetSpec(Spec(ASYNC));
  ASSERT_OK(c.Register(Worker(0)));
  ProgressReport failed = Report(0, 1);
  failed.set_error("the updates are not finite");
  EXPECT_EQ(Progress(c, failed).state(), FAILED);
  EXPECT_THAT(c.WaitForOutcomeHeard(absl::Now()),
              ElementsAre("worker-1 at h1:1", "evaluator"));
  const RegisterTaskRequest evaluator = Evaluator();
  std::thread late([&] {
    EXPECT_THAT(c.Register(Worker(1)),
                StatusIs(absl::StatusCode::kAborted,
                         HasSubstr("the updates are not finite")));
    EXPECT_THAT(c.Register(evaluator), StatusIs(absl::StatusCode::kAborted));
  });
  EXPECT_THAT(c.WaitForOutcomeHeard(absl::InfiniteFuture()), IsEmpty());
  late.join();

  JobCoordinator started(options);
  started.SetSpec(Spec(ASYNC));
  ASSERT_OK(started.Register(Worker(0)));
  started.EndStartup();
  started.Fail("a parameter server was lost");
  // The evaluator is never part of the start-up: it may still be starting.
  EXPECT_THAT(started.WaitForOutcomeHeard(absl::Now()),
              ElementsAre("worker-0 at h0:1", "evaluator"));
}

// A chief restarted late in the job hears first from a worker that has
// trained its last step and starts without waiting for the others: a
// worker that has not reported to it yet still trains, or waits for the
// outcome, and must hear it. Without a finished worker at the end of the
// start-up, the chief had heard from every worker it waits for.
TEST(JobCoordinatorTest, ARestartedChiefTellsWorkersItHasNotHeardFromYet) {
  JobCoordinator resumed(TwoWorkers());
  resumed.SetSpec(Spec(ASYNC));
  Progress(resumed, Report(0, 100, /*finished=*/true));
  resumed.EndStartup();
  resumed.Succeed();
  EXPECT_THAT(resumed.WaitForOutcomeHeard(absl::Now()),
              ElementsAre("worker-0 at h0:1", "worker-1 at h1:1"));
  // Their next reports are answered with the outcome.
  EXPECT_EQ(Progress(resumed, Report(0, 100, /*finished=*/true)).state(),
            SUCCEEDED);
  EXPECT_EQ(Progress(resumed, Report(1, 98, /*finished=*/true)).state(),
            SUCCEEDED);
  EXPECT_THAT(resumed.WaitForOutcomeHeard(absl::Now()), IsEmpty());

  JobCoordinator fresh(TwoWorkers());
  fresh.SetSpec(Spec(ASYNC));
  ASSERT_OK(fresh.Register(Worker(0)));
  fresh.EndStartup();
  fresh.Succeed();
  EXPECT_EQ(Progress(fresh, Report(0, 100, /*finished=*/true)).state(),
            SUCCEEDED);
  EXPECT_THAT(fresh.WaitForOutcomeHeard(absl::Now()), IsEmpty());
}

// The same chief supervising: a worker not heard from since its restart
// is not "lost" at once (its silence counts from the start-up's end, not
// the epoch), so it is still waited for to hear the outcome. Lost at once,
// it was left to wait out its recovery timeout (5 minutes) for a chief
// that had exited.
TEST(JobCoordinatorTest, AWorkerNotHeardFromYetIsNotLostAtOnce) {
  FakeClock& clock = SimulatedClock();
  JobCoordinator resumed(TwoWorkers(absl::Seconds(60), &clock));
  resumed.SetSpec(Spec(ASYNC));
  Progress(resumed, Report(0, 100, /*finished=*/true));
  resumed.EndStartup();
  // The supervisor's look (training is over: worker 0 reached the total).
  resumed.WaitForTrainingEnd(clock.Now() + absl::Seconds(1));
  resumed.Succeed();
  EXPECT_THAT(resumed.WaitForOutcomeHeard(clock.Now()),
              ElementsAre("worker-0 at h0:1", "worker-1 at h1:1"));
}

// The worker whose error failed the job knows: the chief does not wait
// for it to hear the outcome.
TEST(JobCoordinatorTest, TheFailingWorkerNeedNotHearTheOutcome) {
  JobCoordinator c(TwoWorkers());
  c.SetSpec(Spec(ASYNC));
  ASSERT_OK(c.Register(Worker(0)));
  ASSERT_OK(c.Register(Worker(1)));
  ProgressReport failed = Report(0, 5);
  failed.set_error("cannot read the data");
  EXPECT_EQ(Progress(c, failed).state(), FAILED);
  EXPECT_THAT(c.WaitForOutcomeHeard(absl::Now()),
              ElementsAre("worker-1 at h1:1"));
}

JobCoordinator::Options DescribedJob() {
  JobCoordinator::Options options = TwoWorkers();
  options.chief_address = "c:1";
  options.ps_addresses = {{0, "p0:1"}};
  options.evaluator_address = "e:1";
  options.job_name = "described";
  options.mode = SYNC;
  return options;
}

const TaskView& Row(const JobDescription& d, const std::string& task) {
  for (const TaskView& v : d.tasks()) {
    if (v.task() == task) return v;
  }
  static const TaskView* none = new TaskView();
  ADD_FAILURE() << "no row for " << task << " in " << d.DebugString();
  return *none;
}

TEST(JobCoordinatorDescribeTest, StartupNamesWhatIsMissing) {
  JobCoordinator c(DescribedJob());
  c.SetActivity("waiting for the parameter servers to answer");
  JobDescription d = c.Describe();
  EXPECT_EQ(d.job_name(), "described");
  EXPECT_EQ(d.mode(), SYNC);
  EXPECT_EQ(d.status().state(), INITIALIZING);
  EXPECT_EQ(d.activity(), "waiting for the parameter servers to answer");
  ASSERT_EQ(d.tasks_size(), 5);  // chief, ps-0, worker-0, worker-1, evaluator
  EXPECT_EQ(d.tasks(0).task(), "chief-0");
  EXPECT_EQ(d.tasks(0).address(), "c:1");
  EXPECT_EQ(Row(d, "ps-0").state(), TaskView::MISSING);
  EXPECT_EQ(Row(d, "worker-1").state(), TaskView::MISSING);
  EXPECT_THAT(Row(d, "worker-1").detail(), HasSubstr("initialized"));
  EXPECT_EQ(Row(d, "evaluator-0").state(), TaskView::MISSING);
  EXPECT_EQ(Row(d, "evaluator-0").address(), "e:1");
  EXPECT_TRUE(d.starting());
  c.EndStartup();
  EXPECT_FALSE(c.Describe().starting());
}

TEST(JobCoordinatorDescribeTest, EveryWorkerStateShows) {
  JobCoordinator::Options options = DescribedJob();
  options.num_workers = 4;
  options.mode = ASYNC;
  JobCoordinator c(options);
  c.SetSpec(Spec(ASYNC));
  for (int i = 0; i < 3; ++i) ASSERT_OK(c.Register(Worker(i)));
  ProgressReport preparing;
  preparing.set_worker_index(0);
  preparing.set_preparing(true);
  c.Progress(preparing);
  ProgressReport training = Report(1, 40);
  training.set_local_steps(20);
  training.set_examples_per_sec(1234);
  Progress(c, training);
  Progress(c, Report(2, 100, /*finished=*/true));
  JobDescription d = c.Describe();
  EXPECT_EQ(Row(d, "worker-0").state(), TaskView::PREPARING);
  EXPECT_EQ(Row(d, "worker-1").state(), TaskView::TRAINING);
  EXPECT_EQ(Row(d, "worker-1").local_steps(), 20);
  EXPECT_EQ(Row(d, "worker-1").examples_per_sec(), 1234);
  EXPECT_GE(Row(d, "worker-1").seconds_since_contact(), 0);
  EXPECT_EQ(Row(d, "worker-2").state(), TaskView::FINISHED);
  EXPECT_EQ(Row(d, "worker-3").state(), TaskView::MISSING);
  EXPECT_EQ(Row(d, "worker-3").seconds_since_contact(), -1);

  ProgressReport failed = Report(1, 41);
  failed.set_error("out of memory");
  Progress(c, failed);
  d = c.Describe();
  EXPECT_EQ(Row(d, "worker-1").state(), TaskView::FAILED);
  EXPECT_EQ(Row(d, "worker-1").detail(), "out of memory");
}

TEST(JobCoordinatorDescribeTest, ALostWorkerAndTheEndShow) {
  JobCoordinator c(DescribedJob());
  JobSpec spec = Spec(ASYNC);
  c.SetSpec(spec);
  ASSERT_OK(c.Register(Worker(0)));
  ASSERT_OK(c.Register(Worker(1)));
  ASSERT_OK(c.Register(Evaluator()));
  EvaluationReport eval;
  eval.set_global_step(50);
  eval.set_accuracy(0.75);
  ASSERT_OK(c.Evaluation(eval));
  JobDescription d = c.Describe();
  EXPECT_EQ(Row(d, "evaluator-0").state(), TaskView::EVALUATING);
  EXPECT_DOUBLE_EQ(Row(d, "evaluator-0").accuracy(), 0.75);
  EXPECT_EQ(Row(d, "evaluator-0").global_step(), 50);

  c.Fail("worker-0 failed: disk full");
  d = c.Describe();
  EXPECT_EQ(d.status().state(), FAILED);
  EXPECT_THAT(Row(d, "worker-1").detail(), HasSubstr("has not yet heard"));
  StatusRequest asks;
  asks.set_task_type("worker");
  asks.set_task_index(1);
  c.Status(asks);
  EXPECT_THAT(Row(c.Describe(), "worker-1").detail(),
              Not(HasSubstr("has not yet heard")));
}

TEST(JobCoordinatorDescribeTest, AnEvaluatorReplacedByTheChiefShowsLost) {
  JobCoordinator c(DescribedJob());
  c.SetSpec(Spec(ASYNC));
  ASSERT_OK(c.Register(Evaluator()));
  EvaluationReport during;
  during.set_global_step(50);
  ASSERT_OK(c.Evaluation(during));
  EXPECT_EQ(c.last_evaluation()->evaluated_by(), "evaluator-0");
  EvaluationReport own;
  own.set_global_step(100);
  own.set_accuracy(0.8);
  c.RecordChiefEvaluation(own);
  ASSERT_TRUE(c.last_evaluation().has_value());
  EXPECT_TRUE(c.last_evaluation()->final());
  EXPECT_EQ(c.last_evaluation()->evaluated_by(), "chief-0");
  const JobDescription described = c.Describe();
  const TaskView& row = Row(described, "evaluator-0");
  EXPECT_EQ(row.state(), TaskView::LOST);
  EXPECT_THAT(row.detail(),
              HasSubstr("chief-0 evaluated the final model at step 100"));
  // The evaluator is not waited for to hear the end.
  c.EndStartup();
  c.Succeed();
  EXPECT_THAT(c.WaitForOutcomeHeard(absl::Now()), IsEmpty());
}

TEST(JobCoordinatorDescribeTest, SilentWorkersAreLost) {
  FakeClock clock;
  JobCoordinator::Options options = DescribedJob();
  options.heartbeat_timeout = absl::Seconds(1);
  options.clock = &clock;
  JobCoordinator c(options);
  c.SetSpec(Spec(ASYNC));
  ASSERT_OK(c.Register(Worker(0)));
  clock.Advance(absl::Seconds(2));
  c.WaitForTrainingEnd(clock.Now());
  const JobDescription d = c.Describe();
  const TaskView& lost = Row(d, "worker-0");
  EXPECT_EQ(lost.state(), TaskView::LOST);
  EXPECT_THAT(lost.detail(), HasSubstr("heartbeat timeout"));
}

TEST(JobCoordinatorDescribeTest, APauseShowsOnEveryTrainingWorker) {
  JobCoordinator c(DescribedJob());
  c.SetSpec(Spec(ASYNC));
  ASSERT_OK(c.Register(Worker(0)));
  ASSERT_OK(c.Register(Worker(1)));
  Progress(c, Report(0, 10));
  Progress(c, Report(1, 12));
  const int64_t generation = c.Status().generation();
  ASSERT_TRUE(c.Pause("restoring ps-0"));
  ProgressReport paused = Report(0, 12);
  paused.set_paused(true);
  paused.set_generation(generation);
  c.Progress(paused);

  JobDescription d = c.Describe();
  EXPECT_EQ(Row(d, "worker-0").state(), TaskView::PAUSED);
  EXPECT_EQ(Row(d, "worker-0").detail(), "paused by the chief: restoring ps-0");
  // worker-1 has not reported since the pause: it is not training either.
  EXPECT_EQ(Row(d, "worker-1").state(), TaskView::PAUSED);
  EXPECT_THAT(Row(d, "worker-1").detail(),
              HasSubstr("has not reported since the pause"));

  c.Resume(12);
  d = c.Describe();
  // worker-0's last report says paused, but the job trains again.
  EXPECT_EQ(Row(d, "worker-0").state(), TaskView::TRAINING);
  EXPECT_THAT(Row(d, "worker-0").detail(), HasSubstr("resuming"));
  EXPECT_EQ(Row(d, "worker-1").state(), TaskView::TRAINING);
}

}  // namespace
}  // namespace psflow
