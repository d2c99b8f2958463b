#include "evaluator/evaluator.h"

#include <atomic>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "client/ps_shard_test_util.h"
#include "common/clock.h"
#include "common/job/placement.h"
#include "common/mutex.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/device/cpu/cpu_device.h"
#include "proto/protocol.h"
#include "tests/forwarding_coordinator.h"
#include "tests/in_process_job.h"

namespace psflow {
namespace {

using ::psflow::testing::InProcessJob;
using ::testing::AllOf;
using ::testing::HasSubstr;

// A chief that never answers.
class SilentChief final : public CoordinatorClient {
 public:
  absl::StatusOr<JobSpec> Register(const TaskId&, uint64_t,
                                   absl::Time) override {
    return absl::UnavailableError("silent");
  }
  absl::StatusOr<StatusResponse> ReportProgress(const ProgressReport&,
                                                absl::Duration) override {
    return absl::UnavailableError("silent");
  }
  absl::StatusOr<StatusResponse> GetStatus(absl::Duration) override {
    return absl::UnavailableError("the chief at h:1 is gone");
  }
  absl::Status ReportEvaluation(const EvaluationReport&,
                                absl::Duration) override {
    return absl::UnavailableError("silent");
  }
  absl::StatusOr<int64_t> RestoreCheckpoint(const std::string&,
                                            absl::Duration) override {
    return absl::UnavailableError("silent");
  }
  absl::StatusOr<JobDescription> DescribeJob(absl::Duration) override {
    return absl::UnavailableError("silent");
  }
};

// A chief that ends the job and exits: once `Exit()` is called, it answers
// FAILED to one status request from a thread other than the evaluator's
// loop (the job-end watch heard it), then nothing (the chief is gone): the
// loop, busy when the answer came, finds the chief gone when it asks.
class ExitingChief final : public testing::ForwardingCoordinator {
 public:
  using ForwardingCoordinator::ForwardingCoordinator;
  void Exit() { exiting_ = true; }
  bool WatchHeard() const { return answered_end_; }
  absl::StatusOr<StatusResponse> GetStatus(absl::Duration timeout) override {
    {
      MutexLock lock(&mu_);
      if (!loop_.has_value()) loop_ = std::this_thread::get_id();
      if (exiting_) {
        if (answered_end_ || std::this_thread::get_id() == *loop_) {
          return absl::UnavailableError("the chief at h:1 is gone");
        }
        answered_end_ = true;
        StatusResponse failed;
        failed.set_state(FAILED);
        failed.set_message("worker-1 was lost for good");
        return failed;
      }
    }
    return ForwardingCoordinator::GetStatus(timeout);
  }

 private:
  Mutex mu_;
  std::optional<std::thread::id> loop_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> exiting_{false};
  std::atomic<bool> answered_end_{false};
};

// A chief that does not answer status requests until Speak() (as while
// it restarts), then answers as the chief it forwards to.
class MutedChief final : public testing::ForwardingCoordinator {
 public:
  using ForwardingCoordinator::ForwardingCoordinator;
  void Speak() { muted_ = false; }
  absl::StatusOr<StatusResponse> GetStatus(absl::Duration timeout) override {
    if (muted_) return absl::UnavailableError("the chief at h:1 restarts");
    return ForwardingCoordinator::GetStatus(timeout);
  }

 private:
  std::atomic<bool> muted_{true};
};

// A chief whose first answer to a final evaluation is lost (the call
// fails as an unreachable chief's would) or refused (ABORTED, as after a
// restore); later reports go through. Counts the final reports.
class LosingChief final : public testing::ForwardingCoordinator {
 public:
  LosingChief(CoordinatorClient* chief, absl::Status first_answer)
      : ForwardingCoordinator(chief), first_answer_(std::move(first_answer)) {}
  absl::Status ReportEvaluation(const EvaluationReport& report,
                                absl::Duration timeout) override {
    if (report.final() && finals_.fetch_add(1) == 0) return first_answer_;
    return ForwardingCoordinator::ReportEvaluation(report, timeout);
  }
  int finals() const { return finals_; }

 private:
  const absl::Status first_answer_;
  std::atomic<int> finals_{0};
};

// A parameter server that took the job's configuration and then went
// silent: every pull waits until CancelInFlight (as a call to a dead
// server waits for its connection until the RPC deadline).
class HangingShard final : public testing::FailingShard {
 public:
  HangingShard()
      : FailingShard("ps-0 (hanging)", absl::UnavailableError("hanging")) {}
  absl::Status CreateVariables(const CreateVariablesRequest&,
                               absl::Time) override {
    return absl::OkStatus();
  }
  void PullBatch(
      const PullBatchRequest&, std::vector<absl::Span<float>>, absl::Time,
      std::function<void(absl::StatusOr<PullBatchResponse>)> done) override {
    MutexLock lock(&mu_);
    pulls_.push_back(std::move(done));
  }
  void CancelInFlight() override {
    std::vector<std::function<void(absl::StatusOr<PullBatchResponse>)>> pulls;
    {
      MutexLock lock(&mu_);
      pulls.swap(pulls_);
    }
    for (auto& done : pulls) done(absl::CancelledError("cancelled"));
  }
  bool HasWaitingPull() {
    MutexLock lock(&mu_);
    return !pulls_.empty();
  }

 private:
  Mutex mu_;
  std::vector<std::function<void(absl::StatusOr<PullBatchResponse>)>> pulls_
      ABSL_GUARDED_BY(mu_);
};

// Softmax regression over 4 features and 2 classes on one in-process
// parameter server, evaluated live (the job saves no checkpoints), with an
// in-process chief.
class EvaluatorTest : public ::testing::Test {
 protected:
  EvaluatorTest() {
    spec_ = testing::SoftmaxRegressionSpec(ASYNC, 10, 0.1);
    JobConfig& job = *spec_.mutable_config();
    job.mutable_evaluation()->set_batch_size(32);
    job.mutable_evaluation()->set_every_secs(0.1);

    test_.num_examples = 100;
    test_.example_shape = {4};
    test_.num_features = 4;
    test_.num_classes = 2;
    for (int i = 0; i < 100; ++i) {
      test_.labels.push_back(i % 2);
      for (int f = 0; f < 4; ++f) test_.features.push_back((i * 13 + f) % 256);
    }
  }

  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(
        job_, InProcessJob::Start(spec_, TaskId{TaskType::kEvaluator, 0}));
    device_ = CreateCpuDevice(1);
    parts_.spec = &spec_;
    parts_.coordinator = job_->chief.get();
    parts_.client = job_->client.get();
    parts_.device = device_.get();
    parts_.test = &test_;
    policy_.poll_interval = absl::Milliseconds(1);
    policy_.retry_interval = absl::Milliseconds(1);
  }

  // Joins the evaluator (as RunEvaluator does first) and runs it while the
  // chief's side waits for the final evaluation, which it returns; the
  // evaluator's own result goes to `result`.
  std::optional<EvaluationReport> RunToTheFinalEvaluation(
      absl::Status& result) {
    RegisterTaskRequest joined;
    joined.set_protocol_version(kProtocolVersion);
    joined.set_task_type("evaluator");
    EXPECT_OK(job_->coordinator->Register(joined));
    std::thread evaluator([&] { result = Evaluator(parts_, policy_).Run(); });
    std::optional<EvaluationReport> final_eval =
        job_->coordinator->RunFinalEvaluation(absl::InfiniteFuture());
    evaluator.join();
    return final_eval;
  }

  JobSpec spec_;
  Dataset test_;
  std::unique_ptr<InProcessJob> job_;
  std::unique_ptr<Device> device_;
  Evaluator::Parts parts_;
  Evaluator::Policy policy_;
};

TEST_F(EvaluatorTest, EvaluatesTheLiveModelAndSendsTheFinalEvaluation) {
  absl::Status result;
  std::optional<EvaluationReport> final_eval = RunToTheFinalEvaluation(result);
  EXPECT_OK(result);
  ASSERT_TRUE(final_eval.has_value());
  EXPECT_TRUE(final_eval->final());
  EXPECT_EQ(final_eval->per_class_accuracy_size(), 2);
  EXPECT_GE(final_eval->accuracy(), 0.0);
  EXPECT_LE(final_eval->accuracy(), 1.0);
  EXPECT_GT(final_eval->loss(), 0.0);
}

// A final evaluation the chief did not record is made and sent again,
// not given up on (the chief would wait out its timeout and evaluate
// itself).
TEST_F(EvaluatorTest, AFinalEvaluationTheChiefDidNotRecordIsSentAgain) {
  for (const absl::Status& first :
       {absl::UnavailableError("the chief at h:1 did not answer"),
        absl::AbortedError("the chief restored the model meanwhile")}) {
    SCOPED_TRACE(first.ToString());
    SetUp();
    LosingChief chief(job_->chief.get(), first);
    parts_.coordinator = &chief;
    absl::Status result;
    std::optional<EvaluationReport> final_eval =
        RunToTheFinalEvaluation(result);
    EXPECT_OK(result);
    ASSERT_TRUE(final_eval.has_value());
    EXPECT_EQ(chief.finals(), 2);
    EXPECT_EQ(final_eval->evaluated_by(), "evaluator-0");
  }
}

TEST_F(EvaluatorTest, AFailedJobEndsItWithTheJobsReason) {
  job_->coordinator->Fail("ps-0 was lost");
  EXPECT_THAT(Evaluator(parts_, policy_).Run(),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("ps-0 was lost")));
}

TEST_F(EvaluatorTest, ASucceededJobEndsIt) {
  job_->coordinator->Succeed();
  EXPECT_OK(Evaluator(parts_, policy_).Run());
}

TEST_F(EvaluatorTest, AChiefSilentPastTheTimeoutIsGivenUp) {
  SilentChief silent;
  parts_.coordinator = &silent;
  policy_.chief_timeout = absl::Milliseconds(50);
  EXPECT_THAT(Evaluator(parts_, policy_).Run(),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("lost the chief: the chief at h:1 is gone")));
}

// The job's end heard by the watch thread while the loop evaluated: the
// loop ends as the job did when it finds the chief gone, instead of waiting
// out its chief timeout.
TEST_F(EvaluatorTest, AJobEndTheWatchHeardEndsTheLoopWhenTheChiefIsGone) {
  ExitingChief chief(parts_.coordinator);
  parts_.coordinator = &chief;
  policy_.chief_timeout = absl::Hours(1);
  absl::Status result;
  std::thread evaluator([&] { result = Evaluator(parts_, policy_).Run(); });
  absl::SleepFor(absl::Milliseconds(50));  // the loop asks first
  chief.Exit();
  evaluator.join();
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kAborted,
                               HasSubstr("worker-1 was lost for good")));
  EXPECT_TRUE(chief.WatchHeard());
}

// An evaluation blocked in a pull (its server gone for good) ends as soon
// as the chief fails the job, not at the pull's RPC deadline.
TEST_F(EvaluatorTest, AJobThatEndsStopsAnEvaluationBlockedInAPull) {
  auto shard = std::make_unique<HangingShard>();
  HangingShard* hanging = shard.get();
  std::vector<std::unique_ptr<PsShard>> shards;
  shards.push_back(std::move(shard));
  ASSERT_OK_AND_ASSIGN(Placement placement,
                       PlaceVariables(job_->variables, 1, 1 << 20));
  ParameterClient client(std::move(shards), placement,
                         ParameterClient::Options());
  ASSERT_OK(client.Configure(spec_.ps_config()));
  parts_.client = &client;
  absl::Status result;
  Notification done;
  std::thread evaluator([&] {
    result = Evaluator(parts_, policy_).Run();
    done.Notify();
  });
  // Progress, not time: the evaluation's pull is waiting.
  while (!hanging->HasWaitingPull()) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_FALSE(done.HasBeenNotified());
  job_->coordinator->Fail("ps-0 was lost for good");
  evaluator.join();
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kAborted,
                               HasSubstr("ps-0 was lost for good")));
}

// The job ended while the evaluator could not hear it (a stopped
// process): once continued, it finds neither the chief nor any server
// answering, and gives up long before its chief timeout.
TEST_F(EvaluatorTest, AChiefAndServersThatAreAllSilentEndTheRunSooner) {
  std::vector<std::unique_ptr<PsShard>> shards;
  shards.push_back(std::make_unique<HangingShard>());
  ASSERT_OK_AND_ASSIGN(Placement placement,
                       PlaceVariables(job_->variables, 1, 1 << 20));
  ParameterClient client(std::move(shards), placement,
                         ParameterClient::Options());
  ASSERT_OK(client.Configure(spec_.ps_config()));
  SilentChief silent;
  JobEndWatch watch(&silent, &client, absl::Milliseconds(5),
                    absl::Milliseconds(5));
  parts_.coordinator = &silent;
  parts_.client = &client;
  parts_.job_end_watch = &watch;
  policy_.chief_timeout = absl::Hours(1);
  policy_.chief_silence_with_servers_down = absl::Milliseconds(10);
  EXPECT_THAT(Evaluator(parts_, policy_).Run(),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("the chief at h:1 is gone"),
                             HasSubstr("no parameter server answers either"))));
  EXPECT_TRUE(watch.ServersSilent());
}

// A silent chief with servers that answer (the chief restarting) is waited
// for: the evaluator goes on once it answers again.
TEST_F(EvaluatorTest, ASilentChiefWithServersThatAnswerIsWaitedFor) {
  MutedChief chief(parts_.coordinator);
  JobEndWatch watch(&chief, parts_.client, absl::Milliseconds(5),
                    absl::Milliseconds(5));
  parts_.coordinator = &chief;
  parts_.job_end_watch = &watch;
  policy_.chief_timeout = absl::Hours(1);
  policy_.chief_silence_with_servers_down = absl::Milliseconds(10);
  absl::Status result;
  Notification done;
  std::thread evaluator([&] {
    result = Evaluator(parts_, policy_).Run();
    done.Notify();
  });
  // Progress, not time: the watch has looked at the servers several times
  // while the chief was silent.
  while (watch.cancellations() < 5) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_FALSE(watch.ServersSilent());
  EXPECT_FALSE(done.HasBeenNotified());
  job_->coordinator->Succeed();
  chief.Speak();
  evaluator.join();
  EXPECT_OK(result);
}

// A parameter server that restarted and is not configured again yet (its
// pulls fail FailedPrecondition): the evaluator skips its rounds and waits,
// does not pull while the chief restores it (PAUSED), and evaluates again
// once training resumes: here the final evaluation.
TEST_F(EvaluatorTest,
       ARestartingServerSkipsEvaluationsUntilTheChiefRestoresIt) {
  job_->RestartServer();
  policy_.recovery_retry_interval = absl::Milliseconds(1);
  Evaluator evaluator(parts_, policy_);
  absl::Status result;
  std::thread run([&] { result = evaluator.Run(); });
  // Progress, not time: the evaluator met the unconfigured server.
  while (evaluator.skipped_evaluations() < 2) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  // The chief's recovery: pause, restore the server, resume.
  ASSERT_TRUE(job_->coordinator->Pause("ps-0 restarted"));
  const int64_t skipped_when_paused = evaluator.skipped_evaluations();
  ASSERT_OK(job_->ConfigureServers(spec_));
  job_->coordinator->Resume(0);
  std::optional<EvaluationReport> final_eval =
      job_->coordinator->RunFinalEvaluation(absl::InfiniteFuture());
  run.join();
  EXPECT_OK(result);
  ASSERT_TRUE(final_eval.has_value());
  EXPECT_TRUE(final_eval->final());
  EXPECT_EQ(final_eval->per_class_accuracy_size(), 2);
  // At most the round under way when the pause came was skipped after it.
  EXPECT_LE(evaluator.skipped_evaluations(), skipped_when_paused + 1);
}

// Counts the status requests, and passes the long polls on (a plain
// ForwardingCoordinator answers them at once).
class CountingStatus final : public testing::ForwardingCoordinator {
 public:
  explicit CountingStatus(CoordinatorClient* inner)
      : ForwardingCoordinator(inner), inner_(inner) {}
  absl::StatusOr<StatusResponse> GetStatus(absl::Duration timeout) override {
    ++requests;
    return ForwardingCoordinator::GetStatus(timeout);
  }
  absl::StatusOr<StatusResponse> AwaitStatusChange(
      const StatusResponse& known, absl::Duration wait,
      absl::Duration timeout) override {
    ++requests;
    ++long_polls;
    return inner_->AwaitStatusChange(known, wait, timeout);
  }
  std::atomic<int> requests{0};
  std::atomic<int> long_polls{0};

 private:
  CoordinatorClient* const inner_;
};

// With no evaluation due for an hour, each status request waits for a
// change of the job's state: on a simulated clock the evaluator asks
// about once per wait (5 s), not once per poll interval, and the job's end
// reaches it during a wait.
TEST_F(EvaluatorTest, StatusRequestsWaitForTheJobsStateToChange) {
  FakeClock clock;
  clock.SetAutoAdvance(true);  // the evaluator's waits move it
  spec_.mutable_config()->mutable_evaluation()->set_every_secs(3600);
  ASSERT_OK_AND_ASSIGN(
      job_, InProcessJob::Start(spec_, TaskId{TaskType::kEvaluator, 0},
                                /*configure_servers=*/true, &clock));
  CountingStatus chief(job_->chief.get());
  parts_.coordinator = &chief;
  parts_.client = job_->client.get();
  parts_.clock = &clock;
  // A watch on the real clock that stays silent: only the loop asks.
  JobEndWatch watch(job_->chief.get(), job_->client.get(), absl::Hours(1),
                    absl::Hours(1));
  parts_.job_end_watch = &watch;
  policy_.poll_interval = absl::Milliseconds(250);
  const absl::Time start = clock.Now();
  absl::Status result;
  std::thread run([&] { result = Evaluator(parts_, policy_).Run(); });
  // Progress on the simulated clock: a minute of it passes.
  while (clock.Now() - start < absl::Minutes(1)) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  job_->coordinator->Succeed();
  run.join();
  EXPECT_OK(result);
  // One request per 5 s (polling every 250 ms would ask 20 times as often).
  const absl::Duration simulated = clock.Now() - start;
  EXPECT_GE(chief.long_polls.load(), 10);
  EXPECT_LE(chief.requests.load(), simulated / absl::Seconds(5) + 3)
      << absl::FormatDuration(simulated);
}

TEST_F(EvaluatorTest, ServersFailingPastTheRecoveryTimeoutEndTheRun) {
  job_->RestartServer();
  policy_.recovery_retry_interval = absl::Milliseconds(1);
  policy_.recovery_timeout = absl::Milliseconds(50);
  Evaluator evaluator(parts_, policy_);
  EXPECT_THAT(evaluator.Run(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("could not serve an evaluation"),
                             HasSubstr("--recovery_timeout_s"),
                             HasSubstr("not configured"))));
  EXPECT_GE(evaluator.skipped_evaluations(), 1);
}

}  // namespace
}  // namespace psflow
