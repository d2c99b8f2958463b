#include "chief/training_supervisor.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/state_file.h"
#include "chief/recovery.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/in_process_job.h"

namespace psflow {
namespace {

using ::psflow::testing::InProcessJob;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The supervisor over an in-process job (one parameter server, the
// coordinator), a fake clock, and a recorded server check and restore.
class TrainingSupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const JobSpec spec = testing::SoftmaxRegressionSpec(ASYNC, 1000, 0.1);
    ASSERT_OK_AND_ASSIGN(
        job_, InProcessJob::Start(spec, TaskId{TaskType::kWorker, 0},
                                  /*configure_servers=*/true, &clock_));

    parts_.coordinator = job_->coordinator.get();
    parts_.check_servers = [this] {
      ++server_checks_;
      return server_status_;
    };
    parts_.restore =
        [this](const std::string& why,
               const std::string& checkpoint) -> absl::StatusOr<int64_t> {
      restores_.push_back(checkpoint);
      reasons_.push_back(why);
      return restore_result_;
    };
    // Waits (for the workers to pause, for a server to go) run through
    // their timeouts at once.
    clock_.SetAutoAdvance(true);
    parts_.clock = &clock_;
    policy_.log_interval = absl::Seconds(10);
    policy_.server_check_interval = absl::Seconds(1);
  }

  void UseCheckpoints() {
    CheckpointManagerOptions options;
    options.directory =
        ::testing::TempDir() + "/supervisor_" +
        ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(options.directory);
    options.job_name = "test";
    ASSERT_OK_AND_ASSIGN(
        checkpoints_, CheckpointManager::Create(options, job_->client.get()));
    parts_.checkpoints = checkpoints_.get();
  }

  // The server applies updates up to version `step` (zero gradients: a
  // checkpoint is named by the servers' version), and worker 0 reports
  // reaching it.
  void ReachStep(int64_t step) {
    std::vector<std::vector<float>> zeros;
    for (const LogicalVariable& v : job_->variables) {
      zeros.emplace_back(v.num_elements(), 0.0f);
    }
    std::vector<ParameterClient::Const> gradients;
    for (size_t i = 0; i < zeros.size(); ++i) {
      gradients.emplace_back(job_->variables[i].name, zeros[i]);
    }
    for (; pushed_ < step; ++pushed_) {
      ASSERT_OK(job_->client->Push(gradients)->Wait());
    }
    ProgressReport report;
    report.set_worker_index(0);
    report.set_global_step(step);
    report.set_local_steps(step);
    report.set_generation(job_->coordinator->Status().generation());
    job_->coordinator->Progress(report);
  }

  std::vector<std::string> Saved() const {
    std::vector<std::string> names;
    for (const auto& entry :
         std::filesystem::directory_iterator(checkpoints_->directory())) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("ckpt-", 0) == 0) names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  // Checkpoints at step 9, and ps-0 saying it is shutting down: the
  // server check's answer. Shutdown requests are counted in shut_down_.
  absl::Status OneServerLeaving() {
    UseCheckpoints();
    ReachStep(9);
    parts_.shutdown_server = [this](int, const std::string&) {
      ++shut_down_;
      return absl::OkStatus();
    };
    StatsResponse leaving;
    leaving.set_terminating(true);
    return CheckParameterServers({leaving}, {});
  }

  // One tick, with the servers' check due; the workers' pause is not
  // waited for.
  absl::Status TickAfterAServerCheckInterval() {
    policy_.stop_pause_timeout = absl::Milliseconds(10);
    TrainingSupervisor supervisor(parts_, policy_, -1);
    clock_.Advance(policy_.server_check_interval);
    return supervisor.Tick();
  }

  // The job stopped on `signal` with step 9 saved, no server let go (the
  // chief stops every server as it ends) and nothing restored.
  void ExpectStopAfterSavingStep9(const absl::Status& status,
                                  const std::string& signal) {
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kCancelled,
                                 AllOf(HasSubstr("received " + signal),
                                       HasSubstr("ckpt-9 at global step 9"))));
    EXPECT_THAT(Saved(), ElementsAre("ckpt-9"));
    EXPECT_EQ(shut_down_, 0);
    EXPECT_THAT(restores_, IsEmpty());
  }

  std::unique_ptr<InProcessJob> job_;
  std::unique_ptr<CheckpointManager> checkpoints_;
  SupervisorParts parts_;
  SupervisorPolicy policy_;
  FakeClock clock_;
  absl::Status server_status_;
  int server_checks_ = 0;
  int64_t pushed_ = 0;
  absl::StatusOr<int64_t> restore_result_ = 0;
  std::vector<std::string> restores_;
  std::vector<std::string> reasons_;
  int shut_down_ = 0;
};

// A failed save is most often a server lost in it: the servers are checked
// in the same tick, not a check interval later, so training is paused
// before it piles up steps the restore would throw away.
TEST_F(TrainingSupervisorTest, AFailedSaveChecksTheServersAtOnce) {
  UseCheckpoints();
  policy_.checkpoint.set_save_every_steps(10);
  TrainingSupervisor supervisor(parts_, policy_, /*restored_step=*/-1);
  ReachStep(5);
  clock_.Advance(policy_.server_check_interval);
  ASSERT_OK(supervisor.Tick());
  ASSERT_EQ(server_checks_, 1);
  ASSERT_OK(supervisor.Tick());
  EXPECT_EQ(server_checks_, 1) << "checked once per interval";
  // The directory is gone (a file in its place): the due save fails.
  std::filesystem::remove_all(checkpoints_->directory());
  { std::ofstream(checkpoints_->directory()) << "not a directory"; }
  ReachStep(10);
  ASSERT_OK(supervisor.Tick());
  EXPECT_EQ(server_checks_, 2) << "checked in the tick whose save failed";
  std::filesystem::remove(checkpoints_->directory());
}

TEST_F(TrainingSupervisorTest, SavesEveryNStepsAndNeverTheSameStepTwice) {
  UseCheckpoints();
  policy_.checkpoint.set_save_every_steps(10);
  TrainingSupervisor supervisor(parts_, policy_, /*restored_step=*/-1);

  ReachStep(9);
  ASSERT_OK(supervisor.Tick());
  EXPECT_THAT(Saved(), IsEmpty());
  ReachStep(10);
  ASSERT_OK(supervisor.Tick());
  ASSERT_OK(supervisor.Tick());
  ReachStep(25);
  ASSERT_OK(supervisor.Tick());
  EXPECT_THAT(Saved(), ElementsAre("ckpt-10", "ckpt-25"));
}

TEST_F(TrainingSupervisorTest, SavesOnTheClockAfterTheRestoredStep) {
  UseCheckpoints();
  policy_.checkpoint.set_save_every_secs(60);
  TrainingSupervisor supervisor(parts_, policy_, /*restored_step=*/5);

  ReachStep(7);
  clock_.Advance(absl::Seconds(59));
  ASSERT_OK(supervisor.Tick());
  EXPECT_THAT(Saved(), IsEmpty());
  clock_.Advance(absl::Seconds(1));
  ASSERT_OK(supervisor.Tick());
  EXPECT_THAT(Saved(), ElementsAre("ckpt-7"));
  // Sixty more seconds without a new step: nothing new to save.
  clock_.Advance(absl::Seconds(60));
  ASSERT_OK(supervisor.Tick());
  EXPECT_THAT(Saved(), ElementsAre("ckpt-7"));
}

TEST_F(TrainingSupervisorTest, ChecksServersOncePerInterval) {
  TrainingSupervisor supervisor(parts_, policy_, -1);
  ASSERT_OK(supervisor.Tick());
  EXPECT_EQ(server_checks_, 0);
  clock_.Advance(absl::Seconds(1));
  ASSERT_OK(supervisor.Tick());
  ASSERT_OK(supervisor.Tick());
  EXPECT_EQ(server_checks_, 1);
  clock_.Advance(absl::Milliseconds(999));
  ASSERT_OK(supervisor.Tick());
  EXPECT_EQ(server_checks_, 1);
  clock_.Advance(absl::Milliseconds(1));
  ASSERT_OK(supervisor.Tick());
  EXPECT_EQ(server_checks_, 2);
}

TEST_F(TrainingSupervisorTest, NextTickIsTheEarliestDuty) {
  policy_.max_tick = absl::Milliseconds(250);
  TrainingSupervisor supervisor(parts_, policy_, -1);
  EXPECT_EQ(supervisor.NextTick(), clock_.Now() + absl::Milliseconds(250));
  policy_.max_tick = absl::Minutes(1);
  TrainingSupervisor slow(parts_, policy_, -1);
  EXPECT_EQ(slow.NextTick(),
            clock_.Now() + absl::Seconds(1));  // the server check
}

TEST_F(TrainingSupervisorTest, LostServerWithoutCheckpointsEndsTheJob) {
  server_status_ = absl::UnavailableError("ps-1 at 10.0.0.2:2222 is gone");
  TrainingSupervisor supervisor(parts_, policy_, -1);
  clock_.Advance(absl::Seconds(1));
  absl::Status ended = supervisor.Tick();
  EXPECT_EQ(ended.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(ended.message(), HasSubstr("ps-1 at 10.0.0.2:2222 is gone"));
  EXPECT_THAT(ended.message(), HasSubstr("checkpoint.directory"));
  EXPECT_THAT(restores_, IsEmpty());
}

TEST_F(TrainingSupervisorTest, LostServerBeforeTheFirstCheckpointEndsTheJob) {
  UseCheckpoints();
  server_status_ = absl::UnavailableError("ps-0 is gone");
  TrainingSupervisor supervisor(parts_, policy_, -1);
  clock_.Advance(absl::Seconds(1));
  absl::Status ended = supervisor.Tick();
  EXPECT_EQ(ended.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(ended.message(), HasSubstr("no checkpoint was saved yet"));
}

// Servers that follow another chief of the job now: nothing to recover
// (a restore would be refused too); the job ends here, saying why.
TEST_F(TrainingSupervisorTest, ASupersededChiefStopsWithoutRecovering) {
  UseCheckpoints();
  server_status_ = absl::AbortedError(
      "Stats refused: this parameter server follows chief incarnation b2");
  TrainingSupervisor supervisor(parts_, policy_, -1);
  clock_.Advance(absl::Seconds(1));
  absl::Status ended = supervisor.Tick();
  EXPECT_EQ(ended.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(ended.message(),
              HasSubstr("this chief no longer controls the parameter servers: "
                        "Stats refused"));
  EXPECT_THAT(restores_, IsEmpty());
}

// A check that fails once (this chief's own connection, closed by the
// server's keepalive while the chief was stopped) is taken again before a
// server is declared lost: a healthy server is never rolled back for it.
TEST_F(TrainingSupervisorTest, AServerIsLostOnlyWhenASecondCheckFailsToo) {
  UseCheckpoints();
  policy_.checkpoint.set_save_every_steps(10);
  TrainingSupervisor supervisor(parts_, policy_, -1);
  ReachStep(10);
  ASSERT_OK(supervisor.Tick());
  int failures_left = 1;
  parts_.check_servers = [this, &failures_left] {
    ++server_checks_;
    return failures_left-- > 0
               ? absl::UnavailableError("stats of ps-0: Broken pipe")
               : absl::OkStatus();
  };
  TrainingSupervisor after_a_stall(parts_, policy_, 10);
  clock_.Advance(absl::Seconds(1));
  const int checks_before = server_checks_;
  ASSERT_OK(after_a_stall.Tick());
  EXPECT_EQ(server_checks_, checks_before + 2);
  EXPECT_THAT(restores_, IsEmpty());
}

TEST_F(TrainingSupervisorTest, LostServerRestoresTheNewestCheckpoint) {
  UseCheckpoints();
  policy_.checkpoint.set_save_every_steps(10);
  TrainingSupervisor supervisor(parts_, policy_, -1);
  ReachStep(10);
  ASSERT_OK(supervisor.Tick());
  ReachStep(20);
  ASSERT_OK(supervisor.Tick());
  ASSERT_THAT(Saved(), ElementsAre("ckpt-10", "ckpt-20"));

  server_status_ = absl::UnavailableError("ps-0 is gone");
  restore_result_ = 20;
  clock_.Advance(absl::Seconds(1));
  ASSERT_OK(supervisor.Tick());
  ASSERT_EQ(restores_.size(), 1);
  EXPECT_THAT(restores_[0], HasSubstr("ckpt-20"));
  EXPECT_THAT(reasons_[0], HasSubstr("ps-0 is gone"));

  // A recovery that fails ends the job, saying why.
  restore_result_ = absl::DeadlineExceededError("ps-0 never came back");
  clock_.Advance(absl::Seconds(1));
  absl::Status ended = supervisor.Tick();
  EXPECT_EQ(ended.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(ended.message(), HasSubstr("recovery failed"));
}

TEST_F(TrainingSupervisorTest, ServesRestoreRequestsAndResumesAfterAFailure) {
  TrainingSupervisor supervisor(parts_, policy_, -1);
  std::vector<absl::StatusOr<int64_t>> answers;
  auto request = [&](const std::string& path) {
    job_->coordinator->RequestRestore(
        {path, [&](absl::StatusOr<int64_t> step) { answers.push_back(step); }});
  };
  restore_result_ = 40;
  request("/ckpt/ckpt-40");
  ASSERT_OK(supervisor.Tick());
  ASSERT_EQ(answers.size(), 1);
  EXPECT_THAT(answers[0], IsOkAndHolds(40));
  EXPECT_THAT(restores_, ElementsAre("/ckpt/ckpt-40"));

  // A failed restore leaves the job paused by the restore procedure; the
  // supervisor resumes it where it was.
  ReachStep(45);
  restore_result_ = absl::DataLossError("truncated index");
  request("/ckpt/ckpt-bad");
  ASSERT_TRUE(job_->coordinator->Pause("restoring"));
  ASSERT_OK(supervisor.Tick());
  ASSERT_EQ(answers.size(), 2);
  EXPECT_EQ(answers[1].status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(job_->coordinator->state(), TRAINING);
  EXPECT_EQ(job_->coordinator->Status().global_step(), 45);
}

// A restore whose commit failed may have left the servers partly restored:
// the job stops there instead of training on that model.
TEST_F(TrainingSupervisorTest, ARestoreFailedInItsCommitStopsTheJob) {
  TrainingSupervisor supervisor(parts_, policy_, -1);
  std::vector<absl::StatusOr<int64_t>> answers;
  ReachStep(45);
  restore_result_ =
      PartlyRestoredError(absl::ResourceExhaustedError("ps-1 has no room"));
  job_->coordinator->RequestRestore(
      {"/ckpt/ckpt-30",
       [&](absl::StatusOr<int64_t> step) { answers.push_back(step); }});
  ASSERT_TRUE(job_->coordinator->Pause("restoring"));
  const absl::Status ended = supervisor.Tick();
  EXPECT_EQ(ended.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(ended.message(),
              AllOf(HasSubstr("partly restored"), HasSubstr("/ckpt/ckpt-30"),
                    HasSubstr("start the job again")));
  ASSERT_EQ(answers.size(), 1);
  EXPECT_EQ(answers[0].status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(job_->coordinator->state(), TRAINING);
}

TEST_F(TrainingSupervisorTest, SuperviseReturnsWhenTrainingEnds) {
  TrainingSupervisor supervisor(parts_, policy_, -1);
  job_->coordinator->Fail("worker-0 reported an error");
  EXPECT_OK(supervisor.Supervise());
  EXPECT_EQ(job_->coordinator->state(), FAILED);
}

TEST_F(TrainingSupervisorTest, TellsServersWhichWorkersNoLongerBound) {
  std::vector<std::vector<int>> sent;
  absl::Status answer;
  parts_.exclude_workers = [&](const std::vector<int>& workers) {
    sent.push_back(workers);
    return answer;
  };
  TrainingSupervisor supervisor(parts_, policy_, -1);
  // Worker 0 has not joined yet: outside the bound.
  ASSERT_OK(supervisor.Tick());
  EXPECT_THAT(sent, ElementsAre(ElementsAre(0)));
  ReachStep(3);  // joins and reports
  ASSERT_OK(supervisor.Tick());
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_THAT(sent[1], IsEmpty());
  // Unchanged: sent again only once the refresh interval passed.
  ASSERT_OK(supervisor.Tick());
  EXPECT_EQ(sent.size(), 2u);
  clock_.Advance(policy_.server_check_interval);
  ASSERT_OK(supervisor.Tick());
  EXPECT_EQ(sent.size(), 3u);
  // A finished worker no longer bounds the others; a failed delivery is
  // retried at the next tick.
  ProgressReport finished;
  finished.set_worker_index(0);
  finished.set_finished(true);
  job_->coordinator->Progress(finished);
  answer = absl::UnavailableError("ps-0 is down");
  ASSERT_OK(supervisor.Tick());
  answer = absl::OkStatus();
  ASSERT_OK(supervisor.Tick());
  ASSERT_EQ(sent.size(), 5u);
  EXPECT_THAT(sent[3], ElementsAre(0));
  EXPECT_THAT(sent[4], ElementsAre(0));
}

TEST_F(TrainingSupervisorTest, SendsTheBoundAgainRightAfterARestore) {
  int sent = 0;
  parts_.exclude_workers = [&](const std::vector<int>&) {
    ++sent;
    return absl::OkStatus();
  };
  TrainingSupervisor supervisor(parts_, policy_, -1);
  ReachStep(3);
  ASSERT_OK(supervisor.Tick());
  ASSERT_EQ(sent, 1);
  // The pause for the restore lifted the bound on the servers: the set
  // goes out again at once, not a refresh interval later.
  job_->coordinator->RequestRestore(
      {"/ckpt/ckpt-2", [](absl::StatusOr<int64_t>) {}});
  ASSERT_OK(supervisor.Tick());
  EXPECT_THAT(restores_, ElementsAre("/ckpt/ckpt-2"));
  EXPECT_EQ(sent, 2);
}

TEST_F(TrainingSupervisorTest, OtherModesNeverTouchTheBound) {
  // parts_.exclude_workers is unset (ASYNC): ticks simply do not call it.
  TrainingSupervisor supervisor(parts_, policy_, -1);
  ASSERT_OK(supervisor.Tick());
  EXPECT_EQ(job_->coordinator->WorkersOutsideBound(), std::vector<int>{0});
}

// SIGTERM to the chief: the workers are paused and the current step saved
// before the job ends, so a restart loses no applied step.
TEST_F(TrainingSupervisorTest, AStopRequestSavesTheCurrentStepAndEndsTraining) {
  UseCheckpoints();
  ReachStep(7);
  std::optional<std::string> stop;
  parts_.stop_requested = [&stop] { return stop; };
  policy_.stop_pause_timeout = absl::Milliseconds(10);
  TrainingSupervisor supervisor(parts_, policy_, -1);
  ASSERT_OK(supervisor.Tick());
  EXPECT_THAT(Saved(), IsEmpty());
  stop = "SIGTERM";
  EXPECT_THAT(supervisor.Supervise(),
              StatusIs(absl::StatusCode::kCancelled,
                       AllOf(HasSubstr("received SIGTERM"),
                             HasSubstr("ckpt-7 at global step 7"),
                             HasSubstr("start the job again"))));
  EXPECT_THAT(Saved(), ElementsAre("ckpt-7"));
  EXPECT_EQ(job_->coordinator->state(), PAUSED);
}

// A stop while a server is gone (killed: psctl local ends such a job at
// once): nothing can be saved, so the job stops at once saying so, not
// after the save's bound; the newest checkpoint is where to resume.
TEST_F(TrainingSupervisorTest, AStopWithAServerGoneStopsWithoutASave) {
  UseCheckpoints();
  ReachStep(7);
  parts_.stop_requested = [] { return std::optional<std::string>("SIGTERM"); };
  server_status_ = absl::UnavailableError("ps-0 at ps0:1 does not answer");
  TrainingSupervisor supervisor(parts_, policy_, -1);
  EXPECT_THAT(supervisor.Supervise(),
              StatusIs(absl::StatusCode::kCancelled,
                       AllOf(HasSubstr("received SIGTERM"),
                             HasSubstr("a parameter server is gone (ps-0"),
                             HasSubstr("cannot be saved"))));
  EXPECT_THAT(Saved(), IsEmpty());
  EXPECT_GE(server_checks_, 2) << "checked twice before giving up the save";
}

// A signal that came while training ended (after the loop's last look) is
// still acted on: the chief was promised a save and a stop.
TEST_F(TrainingSupervisorTest, AStopRequestAsTrainingEndsIsKept) {
  int looks = 0;
  parts_.stop_requested = [&looks]() -> std::optional<std::string> {
    if (looks++ == 0) return std::nullopt;
    return "SIGTERM";
  };
  TrainingSupervisor supervisor(parts_, policy_, -1);
  job_->coordinator->Fail("worker-0 reported an error");
  EXPECT_THAT(supervisor.Supervise(), StatusIs(absl::StatusCode::kCancelled,
                                               HasSubstr("received SIGTERM")));
  EXPECT_GE(looks, 2);
}

TEST_F(TrainingSupervisorTest, AStopRequestWithoutCheckpointsSaysSo) {
  parts_.stop_requested = [] { return std::optional<std::string>("SIGINT"); };
  TrainingSupervisor supervisor(parts_, policy_, -1);
  EXPECT_THAT(supervisor.Supervise(),
              StatusIs(absl::StatusCode::kCancelled,
                       HasSubstr("saves no checkpoints")));
}

// A server that says it is shutting down (SIGTERM: an evicted pod): the
// workers are paused, the current step saved, the server told to go, and
// that checkpoint restored once it is back: no applied step is lost.
TEST_F(TrainingSupervisorTest, AServerShuttingDownIsSavedFromBeforeItGoes) {
  UseCheckpoints();
  ReachStep(9);
  StatsResponse healthy;
  StatsResponse leaving;
  leaving.set_terminating(true);
  server_status_ = CheckParameterServers({healthy, leaving}, {});
  ASSERT_EQ(ServerLeaving(server_status_), 1);
  std::vector<int> shut_down;
  parts_.shutdown_server = [&](int ps, const std::string&) {
    shut_down.push_back(ps);
    server_status_ = absl::UnavailableError("ps-1 is gone");  // it went
    return absl::OkStatus();
  };
  restore_result_ = 9;
  policy_.stop_pause_timeout = absl::Milliseconds(10);
  TrainingSupervisor supervisor(parts_, policy_, -1);
  clock_.Advance(policy_.server_check_interval);
  ASSERT_OK(supervisor.Tick());
  EXPECT_THAT(Saved(), ElementsAre("ckpt-9"));
  EXPECT_THAT(shut_down, ElementsAre(1));
  ASSERT_EQ(restores_.size(), 1u);
  EXPECT_THAT(restores_[0], HasSubstr("ckpt-9"));
  EXPECT_THAT(reasons_[0], HasSubstr("saved before ps-1 shut down"));
}

// One signal to the chief and the servers together (a drained node, a
// killed psctl local): the chief's stop arrives while a tick looks at the
// servers and finds one leaving. The job saves and stops; it does not go
// on to let the server go and wait to restore what it saved.
TEST_F(TrainingSupervisorTest, AStopThatComesWithAServerLeavingSavesAndStops) {
  const absl::Status leaving = OneServerLeaving();
  std::optional<std::string> stop;
  parts_.check_servers = [&] {
    ++server_checks_;
    stop = "SIGTERM";  // delivered while this tick runs
    return leaving;
  };
  parts_.stop_requested = [&stop] { return stop; };
  ExpectStopAfterSavingStep9(TickAfterAServerCheckInterval(), "SIGTERM");
}

// The stop arrives while the save for a leaving server runs: that save is
// the one the job stops with.
TEST_F(TrainingSupervisorTest, AStopDuringTheSaveForALeavingServerEndsWithIt) {
  server_status_ = OneServerLeaving();
  int looks = 0;
  // Not yet when the tick looks at the servers; by the save's end.
  parts_.stop_requested = [&looks]() -> std::optional<std::string> {
    if (looks++ == 0) return std::nullopt;
    return "SIGINT";
  };
  ExpectStopAfterSavingStep9(TickAfterAServerCheckInterval(), "SIGINT");
  EXPECT_EQ(looks, 2);
}

// A stop that comes as a tick finds a server gone: nothing can be saved,
// so the job stops at once rather than wait minutes for the server.
TEST_F(TrainingSupervisorTest, AStopThatComesWithAServerGoneStopsAtOnce) {
  UseCheckpoints();
  ReachStep(7);
  std::optional<std::string> stop;
  parts_.check_servers = [&] {
    ++server_checks_;
    stop = "SIGTERM";
    return absl::UnavailableError("ps-0 at ps0:1 does not answer");
  };
  parts_.stop_requested = [&stop] { return stop; };
  TrainingSupervisor supervisor(parts_, policy_, -1);
  clock_.Advance(policy_.server_check_interval);
  EXPECT_THAT(supervisor.Tick(),
              StatusIs(absl::StatusCode::kCancelled,
                       AllOf(HasSubstr("received SIGTERM"),
                             HasSubstr("a parameter server is gone"))));
  EXPECT_THAT(Saved(), IsEmpty());
  EXPECT_THAT(restores_, IsEmpty());
}

TEST_F(TrainingSupervisorTest, AServerShuttingDownWithoutCheckpointsIsLeft) {
  StatsResponse leaving;
  leaving.set_terminating(true);
  server_status_ = CheckParameterServers({leaving}, {});
  TrainingSupervisor supervisor(parts_, policy_, -1);
  clock_.Advance(policy_.server_check_interval);
  ASSERT_OK(supervisor.Tick());
  EXPECT_EQ(server_checks_, 1);
  EXPECT_THAT(restores_, IsEmpty());
  EXPECT_EQ(job_->coordinator->state(), TRAINING);
}

}  // namespace
}  // namespace psflow
