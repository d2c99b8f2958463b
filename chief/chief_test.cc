#include "chief/chief.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "checkpoint/checkpoint_manager.h"
#include "chief/termination.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/initializer.h"
#include "proto/protocol.h"
#include "tests/idx_files.h"
#include "tests/in_process_job.h"

namespace psflow {
namespace {

using ::psflow::testing::InProcessJob;
using ::psflow::testing::WriteIdxFile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A chief over in-process twins: one parameter server that starts
// unconfigured (as a fresh ps_server does), the job's coordinator, and a
// fake clock.
class ChiefTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_ = testing::SoftmaxRegressionSpec(ASYNC, /*total_steps=*/5, 0.1);
    spec_.mutable_config()->mutable_training()->set_seed(7);
    ASSERT_OK_AND_ASSIGN(
        job_, InProcessJob::Start(spec_, TaskId{TaskType::kWorker, 0},
                                  /*configure_servers=*/false, &clock_));
    JobCoordinator::Options options;
    options.num_workers = 1;
    options.worker_addresses = {{0, "w0:1"}};
    options.ps_addresses = {{0, "ps0:1"}};
    options.clock = &clock_;
    coordinator_ = std::make_unique<JobCoordinator>(options);
    policy_.startup_timeout = absl::Minutes(2);
    policy_.outcome_wait = absl::Seconds(5);
  }

  ChiefParts Parts() {
    ChiefParts parts;
    parts.coordinator = coordinator_.get();
    parts.client = job_->client.get();
    parts.checkpoints = checkpoints_.get();
    parts.clock = &clock_;
    parts.await_servers = [this](absl::Time) {
      ++server_waits_;
      return servers_answer_;
    };
    return parts;
  }

  std::unique_ptr<Chief> NewChief() {
    return std::make_unique<Chief>(Parts(), policy_, spec_,
                                   job_->definition.get());
  }

  void UseCheckpoints() {
    CheckpointManagerOptions options;
    options.directory =
        ::testing::TempDir() + "/chief_" +
        ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(options.directory);
    options.job_name = "test";
    ASSERT_OK_AND_ASSIGN(
        checkpoints_, CheckpointManager::Create(options, job_->client.get()));
  }

  // 100 held-out examples (4 features, 2 classes) for the final
  // evaluation. Before NewChief: the chief reads the spec it is given.
  void UseTestData() {
    std::vector<uint8_t> pixels, labels;
    for (int i = 0; i < 100; ++i) {
      labels.push_back(i % 2);
      for (int f = 0; f < 4; ++f) pixels.push_back((i * 13 + f) % 256);
    }
    ASSERT_OK_AND_ASSIGN(const std::string images,
                         WriteIdxFile("chief_test_images", {100, 4}, pixels));
    ASSERT_OK_AND_ASSIGN(const std::string labels_file,
                         WriteIdxFile("chief_test_labels", {100}, labels));
    spec_.mutable_config()->mutable_data()->set_test_images(images);
    spec_.mutable_config()->mutable_data()->set_test_labels(labels_file);
  }

  // The one worker's part: it joins once the chief opened the job (or the
  // chief's thread is `done`), trains the job's 5 steps and reports that
  // it finished.
  void WorkerTrainsTheJob(const std::atomic<bool>& done) {
    RegisterTaskRequest join;
    join.set_protocol_version(kProtocolVersion);
    join.set_task_type("worker");
    join.set_task_index(0);
    while (!done && !coordinator_->Register(join).ok()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    Train(5);
    ProgressReport finished;
    finished.set_worker_index(0);
    finished.set_global_step(5);
    finished.set_local_steps(5);
    finished.set_finished(true);
    finished.set_generation(coordinator_->Status().generation());
    coordinator_->Progress(finished);
  }

  // Runs `chief`'s Train while the worker trains the job: training ends,
  // with its final checkpoint when the job saves them.
  void TrainToTheEnd(Chief& chief) {
    absl::Status result = absl::UnknownError("not run");
    std::atomic<bool> done{false};
    std::thread runner([&] {
      result = chief.Train();
      done = true;
    });
    WorkerTrainsTheJob(done);
    runner.join();
    ASSERT_OK(result);
  }

  // How `psctl status` shows the parameter server.
  std::string ServerDetail() const {
    const JobDescription job = coordinator_->Describe();
    for (const TaskView& task : job.tasks()) {
      if (task.task() == "ps-0") return task.detail();
    }
    return "no ps-0";
  }

  std::string ResultFile() const {
    std::ifstream file(policy_.result_file);
    std::stringstream json;
    json << file.rdbuf();
    return json.str();
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

  // Every variable's values on the server, in model order.
  std::vector<std::vector<float>> Values() {
    std::vector<std::vector<float>> values;
    for (const auto& v : job_->variables) values.emplace_back(v.num_elements());
    std::vector<ParameterClient::Mutable> targets;
    for (size_t i = 0; i < values.size(); ++i) {
      targets.emplace_back(job_->variables[i].name, absl::MakeSpan(values[i]));
    }
    EXPECT_OK(job_->client->Pull(targets)->Wait());
    return values;
  }

  // Applies `steps` updates (gradients of ones: the values move).
  void Train(int steps) {
    std::vector<std::vector<float>> ones;
    for (const auto& v : job_->variables)
      ones.emplace_back(v.num_elements(), 1);
    std::vector<ParameterClient::Const> gradients;
    for (size_t i = 0; i < ones.size(); ++i) {
      gradients.emplace_back(job_->variables[i].name, ones[i]);
    }
    for (int s = 0; s < steps; ++s) {
      ASSERT_OK(job_->client->Push(gradients)->Wait());
    }
  }

  FakeClock clock_;
  JobSpec spec_;
  std::unique_ptr<InProcessJob> job_;
  std::unique_ptr<JobCoordinator> coordinator_;
  std::unique_ptr<CheckpointManager> checkpoints_;
  ChiefPolicy policy_;
  absl::Status servers_answer_;
  int server_waits_ = 0;
};

TEST_F(ChiefTest, AFreshJobIsInitializedAndSavedAsTheInitialCheckpoint) {
  UseCheckpoints();
  auto chief = NewChief();
  ASSERT_OK(chief->Prepare());
  EXPECT_EQ(server_waits_, 1);
  EXPECT_EQ(coordinator_->state(), TRAINING);  // open to the workers
  EXPECT_EQ(Values(), InitialValues(job_->definition->variables(), 7));
  EXPECT_THAT(Saved(), ElementsAre("ckpt-0"));
  EXPECT_EQ(chief->restored_step(), 0);
}

TEST_F(ChiefTest, WithoutCheckpointsAFreshJobIsOnlyInitialized) {
  auto chief = NewChief();
  ASSERT_OK(chief->Prepare());
  EXPECT_EQ(Values(), InitialValues(job_->definition->variables(), 7));
  EXPECT_EQ(chief->restored_step(), -1);
}

// A chief restarted while the servers went on: their model is newer than
// any checkpoint, so it is kept, not initialized or restored over.
TEST_F(ChiefTest, ARestartedChiefResumesFromTheServersOwnModel) {
  UseCheckpoints();
  ASSERT_OK(job_->ConfigureServers(spec_));
  ASSERT_OK(checkpoints_->Save().status());  // ckpt-0, older
  Train(3);
  const std::vector<std::vector<float>> trained = Values();
  auto chief = NewChief();
  ASSERT_OK(chief->Prepare());
  EXPECT_EQ(Values(), trained);
  EXPECT_THAT(Saved(), ElementsAre("ckpt-0"));
  EXPECT_EQ(chief->restored_step(), -1);
}

// The servers lost their state (restarted with the chief): the newest
// checkpoint is restored, not a fresh model initialized.
TEST_F(ChiefTest, ServersThatLostTheirStateGetTheNewestCheckpoint) {
  UseCheckpoints();
  ASSERT_OK(job_->ConfigureServers(spec_));
  Train(3);
  ASSERT_OK(checkpoints_->Save().status());  // ckpt-3
  const std::vector<std::vector<float>> at_step_3 = Values();
  Train(2);
  job_->RestartServer();
  auto chief = NewChief();
  ASSERT_OK(chief->Prepare());
  EXPECT_EQ(chief->restored_step(), 3);
  EXPECT_EQ(Values(), at_step_3);
  EXPECT_EQ(coordinator_->Status().global_step(), 0)
      << "the workers' reports set the step";
}

TEST_F(ChiefTest, ServersThatNeverAnswerFailTheJobAndAreStillStopped) {
  servers_answer_ = absl::UnavailableError("ps-0 at h:1 is not healthy");
  clock_.SetAutoAdvance(true);  // Finish waits for the tasks to hear it
  auto chief = NewChief();
  absl::Status prepared = chief->Prepare();
  EXPECT_THAT(prepared, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(chief->Finish(prepared),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(coordinator_->state(), FAILED);
  EXPECT_THAT(coordinator_->Status().message(), HasSubstr("ps-0 at h:1"));
}

// psctl ckpt restore as the job ends: Finish decides the outcome, stops
// the servers and waits for the tasks to hear it; a restore asked for
// meanwhile, or after, is answered at once (nothing serves restores any
// more), so no open call holds the Coordinator's shutdown and the chief
// exits.
TEST_F(ChiefTest, ARestoreAskedForAsTheJobEndsIsAnswered) {
  clock_.SetAutoAdvance(true);  // Finish waits for the tasks to hear it
  auto chief = NewChief();
  ASSERT_OK(chief->Prepare());
  std::vector<absl::Status> answers;
  auto request = [&] {
    coordinator_->RequestRestore(JobCoordinator::RestoreRequest{
        "/ckpt/ckpt-1", [&answers](absl::StatusOr<int64_t> step) {
          answers.push_back(step.status());
        }});
  };
  request();  // waits while the job runs
  EXPECT_THAT(chief->Finish(absl::AbortedError("worker-0 failed")),
              StatusIs(absl::StatusCode::kAborted));
  ASSERT_EQ(answers.size(), 1u);
  request();  // after the outcome, before the Coordinator stops
  ASSERT_EQ(answers.size(), 2u);
  for (const absl::Status& answer : answers) {
    EXPECT_THAT(answer, StatusIs(absl::StatusCode::kFailedPrecondition,
                                 HasSubstr("the job has ended (FAILED: "
                                           "worker-0 failed)")));
  }
  EXPECT_EQ(coordinator_->PendingRestores(), 0);
}

// SIGTERM while the chief waits for its servers (outside training): the
// signal's stop ends the job from its own thread, though the chief's is
// stuck: the job fails naming the signal and what the chief was doing,
// the result says so, the servers are told to stop, the tasks get their
// bounded wait to hear it, and only then does the process exit, 143.
TEST_F(ChiefTest, ASignalBeforeTrainingFailsTheJobAndStopsTheServers) {
  policy_.result_file = ::testing::TempDir() + "/chief_stopped_result.json";
  clock_.SetAutoAdvance(true);  // the tasks' wait to hear the outcome
  struct Exits {
    Notification exited;
    std::atomic<int> code{0};
  };
  auto exits = std::make_shared<Exits>();
  ChiefTermination::Options termination_options;
  termination_options.save_bound = absl::Hours(1);
  termination_options.stop_bound = absl::Hours(1);
  termination_options.exit = [exits](int code) {
    exits->code = code;
    exits->exited.Notify();
  };
  ChiefTermination termination(termination_options);
  Notification waiting, released;
  ChiefParts parts = Parts();
  parts.termination = &termination;
  parts.await_servers = [&](absl::Time) {
    waiting.Notify();
    released.WaitForNotification();  // never answer while the stop runs
    return absl::UnavailableError("ps-0 at ps0:1 is not healthy");
  };
  Chief chief(std::move(parts), policy_, spec_, job_->definition.get());
  termination.SetStopHandler(
      [&chief](const std::string& signal) { chief.StopOnSignal(signal); });
  absl::Status result = absl::UnknownError("not run");
  std::thread runner([&] { result = chief.Run(); });
  waiting.WaitForNotification();
  const absl::Time signalled = clock_.Now();
  termination.OnSignal("SIGTERM");
  exits->exited.WaitForNotification();
  EXPECT_EQ(exits->code, 128 + 15);
  EXPECT_LE(clock_.Now() - signalled, policy_.outcome_wait)
      << "the stop waited past its bound";
  EXPECT_EQ(coordinator_->state(), FAILED);
  EXPECT_EQ(coordinator_->Status().message(),
            "stopped by SIGTERM before training (while waiting for the "
            "parameter servers to answer); start the job again to train it");
  EXPECT_EQ(ServerDetail(), "told to stop by the chief");
  EXPECT_THAT(ResultFile(), HasSubstr("\"state\": \"FAILED\""));
  EXPECT_THAT(ResultFile(), HasSubstr("stopped by SIGTERM before training"));
  termination.ClearStopHandler();
  // The chief's thread, once it moves again, changes nothing.
  released.Notify();
  runner.join();
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kCancelled,
                               HasSubstr("stopped by SIGTERM")));
  EXPECT_EQ(coordinator_->state(), FAILED);
}

// SIGTERM while training waits for a lost server to come back (psctl
// local restarts none, and a pod may never return): nothing the servers
// hold can be saved with one gone, so the signal ends the job at once, as
// outside training, rather than after the preemption save's bound (an
// hour here): the job fails naming the wait and how to resume.
TEST_F(ChiefTest, ASignalWhileALostServerIsAwaitedEndsTheJobAtOnce) {
  UseCheckpoints();
  clock_.SetAutoAdvance(true);
  auto exits = std::make_shared<Notification>();
  auto code = std::make_shared<std::atomic<int>>(0);
  ChiefTermination::Options termination_options;
  termination_options.save_bound = absl::Hours(1);
  termination_options.stop_bound = absl::Hours(1);
  termination_options.exit = [exits, code](int c) {
    *code = c;
    exits->Notify();
  };
  ChiefTermination termination(termination_options);
  Notification waiting, released;
  std::atomic<int> waits{0};
  ChiefParts parts = Parts();
  parts.termination = &termination;
  parts.await_servers = [&](absl::Time) {
    if (waits++ == 0) return absl::OkStatus();  // at the start
    waiting.Notify();
    released.WaitForNotification();
    return absl::UnavailableError("ps-0 at ps0:1 is gone");
  };
  Chief chief(std::move(parts), policy_, spec_, job_->definition.get());
  termination.SetStopHandler(
      [&chief](const std::string& signal) { chief.StopOnSignal(signal); });
  absl::Status result = absl::UnknownError("not run");
  std::thread runner([&] { result = chief.Run(); });
  RegisterTaskRequest join;
  join.set_protocol_version(kProtocolVersion);
  join.set_task_type("worker");
  join.set_task_index(0);
  while (!coordinator_->Register(join).ok()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  Train(2);
  job_->RestartServer();  // its variables are gone: a lost server
  waiting.WaitForNotification();
  EXPECT_THAT(coordinator_->activity(),
              HasSubstr("waiting for the lost parameter servers to come back"));
  termination.OnSignal("SIGTERM");
  ASSERT_TRUE(exits->WaitForNotificationWithTimeout(absl::Seconds(60)))
      << "the stop waited for the save's bound";
  EXPECT_EQ(*code, 128 + 15);
  EXPECT_EQ(coordinator_->state(), FAILED);
  EXPECT_THAT(coordinator_->Status().message(),
              AllOf(HasSubstr("stopped by SIGTERM during training, while "
                              "waiting for the lost parameter servers"),
                    HasSubstr("resume from its newest checkpoint")));
  termination.ClearStopHandler();
  released.Notify();
  runner.join();
  EXPECT_EQ(coordinator_->state(), FAILED);
}

// SIGINT after training (here: after the final save, before the final
// evaluation): the job fails naming it, the servers stop; the chief's own
// Finish afterwards ends nothing again.
TEST_F(ChiefTest, ASignalAfterTrainingFailsTheJobAndStopsTheServers) {
  UseCheckpoints();
  auto chief = NewChief();
  ASSERT_OK(chief->Prepare());
  TrainToTheEnd(*chief);
  clock_.SetAutoAdvance(true);  // the worker never asks again
  chief->StopOnSignal("SIGINT");
  EXPECT_EQ(coordinator_->state(), FAILED);
  EXPECT_EQ(coordinator_->Status().message(),
            "stopped by SIGINT after training (while saving the final "
            "checkpoint)");
  EXPECT_EQ(ServerDetail(), "told to stop by the chief");
  EXPECT_THAT(chief->Finish(absl::OkStatus()),
              StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(coordinator_->state(), FAILED) << "not SUCCEEDED after the stop";
}

// A signal once Finish ended the job changes nothing.
TEST_F(ChiefTest, ASignalAfterTheJobEndedChangesNothing) {
  clock_.SetAutoAdvance(true);
  auto chief = NewChief();
  ASSERT_OK(chief->Finish(absl::OkStatus()));
  chief->StopOnSignal("SIGTERM");
  EXPECT_EQ(coordinator_->state(), SUCCEEDED);
}

// Workers that never join fail the job at the startup deadline, measured
// on the chief's clock (simulated: two minutes pass in milliseconds).
TEST_F(ChiefTest, WorkersThatNeverJoinFailTheJobAtTheStartupDeadline) {
  clock_.SetAutoAdvance(true);
  const absl::Time start = clock_.Now();
  auto chief = NewChief();
  ASSERT_OK(chief->Prepare());
  absl::Status trained = chief->Train();
  EXPECT_THAT(trained, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(trained.message(),
              HasSubstr("workers that never joined by the startup deadline "
                        "(2m): worker-0 at w0:1"));
  EXPECT_GE(clock_.Now() - start, absl::Minutes(2));
}

// The whole job: the chief prepares, the worker joins and trains to the
// last step, the chief saves the final checkpoint, ends the job and tells
// the worker, and writes the result.
TEST_F(ChiefTest, AJobTrainedToItsEndSucceedsWithItsFinalCheckpoint) {
  UseCheckpoints();
  policy_.result_file = ::testing::TempDir() + "/chief_result.json";
  auto chief = NewChief();
  absl::Status result = absl::UnknownError("not run");
  std::atomic<bool> done{false};
  std::thread runner([&] {
    result = chief->Run();
    done = true;
  });
  WorkerTrainsTheJob(done);
  // It keeps asking until it hears the job's end (the chief waits for it).
  StatusRequest ask;
  ask.set_task_type("worker");
  ask.set_task_index(0);
  while (!done) {
    coordinator_->Status(ask);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  runner.join();
  ASSERT_OK(result);
  EXPECT_EQ(coordinator_->state(), SUCCEEDED);
  EXPECT_THAT(Saved(), ElementsAre("ckpt-0", "ckpt-5"));
  EXPECT_THAT(ResultFile(), HasSubstr("\"state\": \"SUCCEEDED\""));
  EXPECT_THAT(ResultFile(), HasSubstr("\"global_step\": 5"));
  EXPECT_THAT(ResultFile(),
              HasSubstr("ckpt-5\", \"final_checkpoint_step\": 5"));
}

// A server lost after training, for good: the chief's own evaluation of
// an image model reads the final checkpoint's files (the numbers the
// evaluator gives), so it neither waits for the server nor fails.
TEST_F(ChiefTest, TheChiefEvaluatesTheFinalCheckpointWithoutItsServers) {
  UseCheckpoints();
  UseTestData();
  auto chief = NewChief();
  ASSERT_OK(chief->Prepare());
  TrainToTheEnd(*chief);
  EXPECT_THAT(Saved(), ElementsAre("ckpt-0", "ckpt-5"));
  job_->RestartServer();
  servers_answer_ = absl::UnavailableError("ps-0 at h:1 is gone");
  const int waits = server_waits_;
  ASSERT_OK(chief->Evaluate());
  EXPECT_EQ(server_waits_, waits) << "waited for a server it did not need";
  std::optional<EvaluationReport> final_eval = coordinator_->last_evaluation();
  ASSERT_TRUE(final_eval.has_value());
  EXPECT_TRUE(final_eval->final());
  EXPECT_EQ(final_eval->evaluated_by(), "chief-0");
  EXPECT_EQ(final_eval->global_step(), 5);
}

// The same loss in a job that saves no checkpoints: the trained model is
// gone, and the job fails saying so and naming the fix, not with a pull
// error.
TEST_F(ChiefTest, AServerLostAfterTrainingWithoutCheckpointsFailsNamingWhy) {
  UseTestData();
  auto chief = NewChief();
  ASSERT_OK(chief->Prepare());
  TrainToTheEnd(*chief);
  job_->RestartServer();
  const absl::Status evaluated = chief->Evaluate();
  EXPECT_THAT(evaluated, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(evaluated.message(), HasSubstr("ps-0 holds 0 of its"));
  EXPECT_THAT(evaluated.message(), HasSubstr("saves no checkpoints"));
  EXPECT_THAT(evaluated.message(), HasSubstr("checkpoint.directory"));
}

// With an evaluator: the chief checks its servers while it waits for the
// final evaluation and restores the lost one's share; the evaluator's
// report made before the restore is refused, the one made after it is the
// job's final evaluation.
TEST_F(ChiefTest, TheEvaluatorEvaluatesTheFinalModelRestoredAfterALoss) {
  UseCheckpoints();
  UseTestData();
  policy_.has_evaluator = true;
  policy_.final_evaluation_timeout = absl::Minutes(10);
  auto chief = NewChief();
  ASSERT_OK(chief->Prepare());
  TrainToTheEnd(*chief);
  const std::vector<std::vector<float>> trained = Values();
  RegisterTaskRequest join;
  join.set_protocol_version(kProtocolVersion);
  join.set_task_type("evaluator");
  ASSERT_OK(coordinator_->Register(join));
  const int64_t generation = coordinator_->Status().generation();
  job_->RestartServer();
  // The evaluator asks for the status (keeping in touch) until the model
  // was restored, then reports twice: pulls begun before the restore, and
  // pulls of the restored model.
  absl::Status stale = absl::UnknownError("not sent"),
               fresh = absl::UnknownError("not sent");
  std::atomic<bool> chief_done{false};
  std::thread evaluator([&] {
    StatusRequest ask;
    ask.set_task_type("evaluator");
    while (!chief_done) {
      const StatusResponse status = coordinator_->Status(ask);
      if (status.state() == FINAL_EVALUATION &&
          status.generation() != generation) {
        EvaluationReport report;
        report.set_final(true);
        report.set_global_step(status.global_step());
        report.set_model_generation(generation);
        stale = coordinator_->Evaluation(report);
        report.set_model_generation(status.generation());
        report.set_accuracy(0.625);
        fresh = coordinator_->Evaluation(report);
        return;
      }
      if (status.state() != FINAL_EVALUATION && status.state() != PAUSED &&
          status.state() != TRAINING) {
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  clock_.SetAutoAdvance(true);
  const absl::Status evaluated = chief->Evaluate();
  chief_done = true;
  evaluator.join();
  ASSERT_OK(evaluated);
  EXPECT_THAT(stale, StatusIs(absl::StatusCode::kAborted));
  EXPECT_OK(fresh);
  EXPECT_EQ(Values(), trained);
  std::optional<EvaluationReport> final_eval = coordinator_->last_evaluation();
  ASSERT_TRUE(final_eval.has_value());
  EXPECT_EQ(final_eval->evaluated_by(), "evaluator-0");
  EXPECT_EQ(final_eval->accuracy(), 0.625);
}

}  // namespace
}  // namespace psflow
