#include "chief/chief.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "chief/final_evaluation.h"
#include "chief/training_supervisor.h"
#include "common/fault_point.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "model/initializer.h"
#include "proto/protocol.h"

namespace psflow {

// A restarted chief finds the servers as its predecessor left them:
// trained (updates applied), untouched (a fresh or restarted server), or
// with a restore cut short (its PREPARE never committed: the servers may
// hold models of different steps).
struct Chief::ServerStates {
  std::vector<std::string> trained, untouched, restore_pending;
  // Every server holds the job's trained state and none is mid-restore:
  // a consistent model, newer than any checkpoint.
  bool LiveModelUsable() const {
    return !trained.empty() && untouched.empty() && restore_pending.empty();
  }
};

Chief::Chief(ChiefParts parts, ChiefPolicy policy, JobSpec spec,
             const ModelDefinition* model)
    : parts_(std::move(parts)),
      policy_(std::move(policy)),
      spec_(std::move(spec)),
      model_(model),
      coordinator_(*parts_.coordinator),
      startup_deadline_(parts_.clock->Now() + policy_.startup_timeout),
      training_start_(parts_.clock->Now()) {}

Chief::~Chief() = default;

absl::Status Chief::Run() {
  absl::Status result = Prepare();
  if (result.ok()) result = Train();
  if (result.ok()) result = Evaluate();
  return Finish(std::move(result));
}

// ---- Prepare ---------------------------------------------------------------

absl::Status Chief::Prepare() {
  coordinator_.SetActivity("waiting for the parameter servers to answer");
  RETURN_IF_ERROR(parts_.await_servers(startup_deadline_));
  coordinator_.SetActivity(
      "configuring the parameter servers and creating the variables");
  RETURN_IF_ERROR(ConfigureServers(startup_deadline_));
  ASSIGN_OR_RETURN(const bool resumed, ResumeExistingModel());
  if (!resumed) RETURN_IF_ERROR(InitializeModel());
  coordinator_.SetSpec(spec_);
  watch_ = std::make_unique<ServerWatch>(parts_.client, &coordinator_.servers(),
                                         absl::Seconds(1), parts_.clock);
  return absl::OkStatus();
}

// A server that still follows an earlier chief of this job (one that
// crashed a moment ago, and this chief is its restart) refuses with
// ABORTED until that one has been silent for the servers'
// --chief_takeover_s: waited out, up to `deadline`. A chief still alive
// keeps its servers, and this one fails naming it.
absl::Status Chief::ConfigureServers(absl::Time deadline) {
  ParameterClient& client = *parts_.client;
  // The calls' deadline on the transport's own (real) clock.
  auto rpc_deadline = [&] {
    return absl::Now() +
           std::max(absl::ZeroDuration(), deadline - parts_.clock->Now());
  };
  absl::Status configured = client.Configure(spec_.ps_config(), rpc_deadline());
  if (absl::IsAborted(configured)) {
    LOG(WARNING) << "a parameter server follows another chief of this job; "
                    "waiting for it to let go (a crashed chief's claim "
                    "lapses): "
                 << configured.message();
    coordinator_.SetActivity(
        "waiting for the parameter servers to follow this chief");
  }
  while (absl::IsAborted(configured) && parts_.clock->Now() < deadline) {
    parts_.clock->SleepFor(absl::Seconds(1));
    configured = client.Configure(spec_.ps_config(), rpc_deadline());
  }
  RETURN_IF_ERROR(configured);
  RETURN_IF_ERROR(client.CreateVariables());
  return client.CreateTables({spec_.tables().begin(), spec_.tables().end()});
}

absl::StatusOr<Chief::ServerStates> Chief::ReadServerStates() {
  const std::vector<int64_t> expected =
      ExpectedVariablesPerServer(parts_.client->placement());
  const std::vector<absl::StatusOr<StatsResponse>> stats =
      parts_.client->StatsOfEach(absl::Seconds(30));
  ServerStates states;
  for (size_t i = 0; i < stats.size(); ++i) {
    if (!stats[i].ok()) return stats[i].status();
    if (i < expected.size() && expected[i] == 0) continue;  // holds nothing
    const std::string name = absl::StrCat("ps-", i);
    if (stats[i]->restore_pending()) states.restore_pending.push_back(name);
    (stats[i]->updates_applied() > 0 ? states.trained : states.untouched)
        .push_back(name);
  }
  return states;
}

// True when resumed from the servers' own model or the newest checkpoint;
// false for a fresh job (nothing trained, no checkpoint);
// FailedPrecondition when some servers hold trained state, others lost
// theirs, and no checkpoint can make them consistent.
absl::StatusOr<bool> Chief::ResumeExistingModel() {
  const JobConfig& job = spec_.config();
  ASSIGN_OR_RETURN(ServerStates servers, ReadServerStates());
  if (servers.LiveModelUsable()) {
    // This chief restarted while the servers (and the workers) went on:
    // their model is consistent and newer than any checkpoint, so resuming
    // from it throws no work away. A sync checkpoint's hold that the old
    // chief left is this one's to lift.
    if (job.training().mode() == SYNC) {
      HoldRequest release;
      release.set_protocol_version(kProtocolVersion);
      release.set_action(HoldRequest::RELEASE);
      absl::Status released = parts_.client->HoldAll(release).status();
      if (!released.ok()) {
        LOG(WARNING) << "cannot lift a checkpoint hold the previous chief "
                        "may have left: "
                     << released.message();
      }
    }
    LOG(INFO) << "every parameter server holds this job's trained variables "
                 "(none restarted, no restore cut short); resuming from them, "
                 "which is newer than any checkpoint";
    return true;
  }
  if (parts_.checkpoints != nullptr) {
    const std::string& directory = parts_.checkpoints->directory();
    // Said once a checkpoint is there to restore.
    bool warn = !servers.trained.empty();
    const absl::Time start = parts_.clock->Now();
    absl::StatusOr<RestoredCheckpoint> restored =
        RestoreNewestIntactCheckpoint(directory, [&](const std::string& path) {
          if (std::exchange(warn, false)) {
            LOG(WARNING)
                << "the parameter servers' own state cannot be resumed ("
                << (servers.untouched.empty()
                        ? ""
                        : absl::StrCat(absl::StrJoin(servers.untouched, ", "),
                                       " restarted and lost theirs; "))
                << (servers.restore_pending.empty()
                        ? ""
                        : absl::StrCat(
                              "a restore was cut short on ",
                              absl::StrJoin(servers.restore_pending, ", ")))
                << "); restoring the newest checkpoint";
          }
          coordinator_.SetActivity(absl::StrCat("restoring ", path));
          return RestoreCheckpoint(path, job.optimizer(), *parts_.client,
                                   absl::Minutes(10));
        });
    if (restored.ok()) {
      restored_step_ = restored->step;
      // A restarted chief: the workers that kept training meanwhile say how
      // far the job had come (the work the restore throws away).
      int64_t reached = 0;
      for (const ProgressReport& report : coordinator_.LastReports()) {
        reached = std::max(reached, report.global_step());
      }
      LOG(INFO) << "restored " << restored->path << " in "
                << absl::FormatDuration(absl::Trunc(parts_.clock->Now() - start,
                                                    absl::Milliseconds(1)))
                << "; resuming at global step " << restored->step << " of "
                << spec_.total_steps()
                << TrainAgainNote(reached, restored->step, spec_.total_steps());
      return true;
    }
    if (!absl::IsNotFound(restored.status())) {
      return absl::Status(
          restored.status().code(),
          absl::StrCat("cannot resume from the checkpoints in ", directory,
                       ": ", restored.status().message(),
                       " (`psctl ckpt verify` checks them; point "
                       "checkpoint.directory elsewhere to start afresh)"));
    }
  }
  if (!servers.trained.empty()) {
    // Some servers hold trained variables, but not a consistent model,
    // and there is no checkpoint to assemble one from.
    std::vector<std::string> lost = servers.untouched;
    lost.insert(lost.end(), servers.restore_pending.begin(),
                servers.restore_pending.end());
    return absl::FailedPreconditionError(absl::StrCat(
        absl::StrJoin(servers.trained, ", "), " hold trained variables but ",
        absl::StrJoin(lost, ", "),
        " lost theirs (restarted, or a restore was cut short), and there is "
        "no checkpoint to restore: the job cannot resume consistently. "
        "Restart every parameter server to train afresh, or configure "
        "checkpoint.directory so a lost server can be recovered"));
  }
  return false;
}

// A fresh job: the model's initial values on every server, then the
// initial checkpoint (a consistent state to recover from before the first
// scheduled save). Nothing has trained yet (workers join only once the
// chief is prepared), so a parameter server lost meanwhile costs nothing:
// wait for it, create the variables again and start over.
absl::Status Chief::InitializeModel() {
  coordinator_.SetActivity("initializing the variables");
  const std::vector<ModelVariable>& variables = model_->variables();
  std::vector<std::vector<float>> initial =
      InitialValues(variables, spec_.config().training().seed());
  std::vector<ParameterClient::Const> values;
  for (size_t v = 0; v < variables.size(); ++v) {
    values.emplace_back(variables[v].name(), initial[v]);
  }
  constexpr int kAttempts = 3;
  for (int attempt = 1;; ++attempt) {
    absl::Status initialized = parts_.client->Assign(values)->Wait();
    if (initialized.ok()) {
      LOG(INFO) << "initialized " << variables.size() << " variables ("
                << absl::StrJoin(parts_.client->placement().bytes_per_ps, ", ")
                << " bytes per ps); " << spec_.total_steps()
                << " global steps over " << spec_.num_workers() << " workers";
    }
    if (initialized.ok() && parts_.checkpoints != nullptr) {
      coordinator_.SetActivity("saving the initial checkpoint");
      absl::StatusOr<SavedCheckpoint> saved = parts_.checkpoints->Save();
      if (saved.ok()) {
        LogSavedCheckpoint(*saved);
        restored_step_ = saved->step;
      } else {
        initialized = absl::Status(
            saved.status().code(),
            absl::StrCat("the initial checkpoint (step 0) failed: ",
                         saved.status().message()));
      }
    }
    if (initialized.ok()) return absl::OkStatus();
    if (attempt == kAttempts) return initialized;
    LOG(WARNING) << "initializing the variables failed ("
                 << initialized.message()
                 << "); waiting for every parameter server and starting over";
    coordinator_.SetActivity(
        "initializing again after a lost parameter server");
    const absl::Time deadline = parts_.clock->Now() + policy_.ps_return_timeout;
    RETURN_IF_ERROR(parts_.await_servers(deadline));
    RETURN_IF_ERROR(ConfigureServers(deadline));
  }
}

// ---- Train -----------------------------------------------------------------

absl::Status Chief::Train() {
  RETURN_IF_ERROR(AwaitWorkers(startup_deadline_));
  coordinator_.EndStartup();
  absl::Time start = parts_.clock->Now();
  {
    MutexLock lock(&end_mu_);  // the result (WriteResult) reads it
    training_start_ = start;
  }
  while (true) {
    absl::Status supervised = SuperviseTraining();
    {
      // The result's training time: not the final save and evaluation.
      MutexLock lock(&end_mu_);
      training_end_ = parts_.clock->Now();
    }
    RETURN_IF_ERROR(supervised);
    LOG(INFO) << "training finished after "
              << absl::FormatDuration(absl::Trunc(parts_.clock->Now() - start,
                                                  absl::Milliseconds(100)));
    ASSIGN_OR_RETURN(const FinalSave saved, SaveFinalCheckpoint());
    if (saved == FinalSave::kSaved) return absl::OkStatus();
    // Restored to an earlier step: the workers train the rest again.
    restored_step_ = coordinator_.Status().global_step();
  }
}

absl::Status Chief::AwaitWorkers(absl::Time deadline) {
  coordinator_.SetActivity("waiting for every worker to join");
  std::vector<std::string> missing = coordinator_.WaitForWorkers(deadline);
  if (coordinator_.state() == FAILED) {
    // A worker that joined failed the job while others were starting: its
    // cause is the job's, not the late ones.
    return absl::AbortedError(coordinator_.Status().message());
  }
  if (missing.empty()) {
    LOG(INFO) << "all " << spec_.num_workers() << " workers joined; training";
    return absl::OkStatus();
  }
  if (coordinator_.state() == TRAINING &&
      coordinator_.Status().global_step() >= spec_.total_steps()) {
    LOG(WARNING) << "training reached its end without "
                 << absl::StrJoin(missing, ", ");
    return absl::OkStatus();
  }
  return absl::DeadlineExceededError(
      absl::StrCat("workers that never joined by the startup deadline (",
                   absl::FormatDuration(policy_.startup_timeout),
                   "): ", absl::StrJoin(missing, ", ")));
}

absl::Status Chief::StoppedWaiting(const std::string& signal) const {
  return absl::CancelledError(absl::StrCat(
      "stopped by ", signal,
      " during training, while waiting for the lost parameter servers to "
      "come back; start the job again with the same checkpoint directory to "
      "resume from its newest checkpoint"));
}

RecoveryOptions Chief::Recovery() const {
  RecoveryOptions recovery;
  recovery.await_servers = [this](absl::Time deadline) -> absl::Status {
    // While a lost server is awaited, nothing the servers hold can be
    // saved (one is gone; the newest checkpoint is what a restore will
    // use): a stop signal then ends the job at once, as outside training,
    // not after the preemption save's bound.
    ChiefTermination* termination = parts_.termination;
    if (termination != nullptr && termination->requested().has_value()) {
      // Asked to stop before this wait: no save can be made now.
      return StoppedWaiting(*termination->requested());
    }
    awaiting_lost_server_ = true;
    const bool left =
        termination != nullptr && termination->LeaveTrainingToWait();
    if (termination != nullptr && !left && termination->requested()) {
      awaiting_lost_server_ = false;
      return StoppedWaiting(*termination->requested());
    }
    absl::Status back = parts_.await_servers(deadline);
    awaiting_lost_server_ = false;
    if (left && !termination->ResumeTraining()) {
      return StoppedWaiting(termination->requested().value_or("a signal"));
    }
    return back;
  };
  recovery.spec = &spec_;
  recovery.coordinator = &coordinator_;
  recovery.client = parts_.client;
  recovery.ps_return_timeout = policy_.ps_return_timeout;
  return recovery;
}

absl::Status Chief::CheckServers() {
  return CheckParameterServers(
      watch_->Poll(), ExpectedVariablesPerServer(parts_.client->placement()));
}

absl::Status Chief::SuperviseTraining() {
  ParameterClient& client = *parts_.client;
  const RecoveryOptions recovery = Recovery();
  SupervisorParts parts;
  parts.coordinator = &coordinator_;
  parts.checkpoints = parts_.checkpoints;
  parts.metrics = parts_.metrics;
  parts.checkpoint_metrics = parts_.checkpoint_metrics;
  parts.clock = parts_.clock;
  parts.check_servers = [this] { return CheckServers(); };
  parts.restore = [&recovery](const std::string& why,
                              const std::string& checkpoint) {
    return PauseAndRestore(recovery, why, checkpoint);
  };
  parts.shutdown_server = [&client](int ps, const std::string& reason) {
    return client.Shutdown(ps, reason);
  };
  if (spec_.config().training().mode() == BOUNDED) {
    parts.exclude_workers = [&client](const std::vector<int>& workers) {
      return client.ExcludeWorkers(workers, absl::Seconds(2));
    };
  }
  ChiefTermination* termination = parts_.termination;
  if (termination != nullptr) {
    parts.stop_requested = [termination] { return termination->requested(); };
  }
  SupervisorPolicy policy;
  policy.checkpoint = spec_.config().checkpoint();
  policy.log_interval = policy_.log_interval;
  policy.max_tick = std::min(policy_.log_interval, policy.max_tick);
  TrainingSupervisor supervisor(std::move(parts), policy, restored_step_);
  coordinator_.SetActivity("supervising training");
  if (termination != nullptr && !termination->SetTraining(true)) {
    // A signal's stop is under way (StopOnSignal): nothing to supervise.
    return absl::CancelledError("stopped by a signal before training began");
  }
  supervising_ = true;
  absl::Status supervised = supervisor.Supervise();
  // Out of training first: the preemption save's bound (termination.h)
  // then no longer starts the stop meant for a save still under way.
  if (termination != nullptr) termination->SetTraining(false);
  supervising_ = false;
  // A signal from now on stops the job "after training" (StopOnSignal).
  training_over_ = true;
  RETURN_IF_ERROR(supervised);
  if (coordinator_.state() == FAILED) {
    return absl::AbortedError(coordinator_.Status().message());
  }
  return absl::OkStatus();
}

// Every server must still hold its variables: one lost before or during
// the save (its state gone with it) is recovered as during training, by
// restoring the newest checkpoint everywhere, and the workers, who wait
// for the job's end (worker/trainer.h), train the steps since it again
// (kTrainAgain). A save that fails with every server healthy (a full
// disk) is tried again, then fails the job.
absl::StatusOr<Chief::FinalSave> Chief::SaveFinalCheckpoint() {
  CheckpointManager* checkpoints = parts_.checkpoints;
  if (checkpoints == nullptr) return FinalSave::kSaved;
  LOG(INFO) << "training reached global step "
            << coordinator_.Status().global_step()
            << "; saving the final checkpoint";
  FaultPoint("chief.final_save");
  coordinator_.SetActivity("saving the final checkpoint");
  constexpr int kAttempts = 3;
  absl::Status servers = CheckServers();
  for (int attempt = 1; servers.ok(); ++attempt) {
    absl::StatusOr<SavedCheckpoint> saved = checkpoints->Save();
    if (parts_.checkpoint_metrics != nullptr) {
      parts_.checkpoint_metrics->Record(saved);
    }
    if (saved.ok()) {
      LogSavedCheckpoint(*saved);
      final_checkpoint_ = saved->path;
      final_checkpoint_step_ = saved->step;
      return FinalSave::kSaved;
    }
    // A server lost during the save shows in its check.
    servers = CheckServers();
    if (servers.ok() && attempt == kAttempts) {
      return absl::Status(
          saved.status().code(),
          absl::StrCat("the final checkpoint failed ", kAttempts,
                       " times: ", saved.status().message()));
    }
    if (servers.ok()) {
      LOG(WARNING) << "the final checkpoint failed (trying again): "
                   << saved.status().message();
    }
  }
  if (absl::IsAborted(servers)) {
    return absl::AbortedError(
        absl::StrCat("this chief no longer controls the parameter servers: ",
                     servers.message()));
  }
  LOG(WARNING) << "parameter server lost at the final checkpoint: "
               << servers.message();
  const RecoveryOptions recovery = Recovery();
  RETURN_IF_ERROR(
      RecoverFromNewestCheckpoint(
          servers, checkpoints->directory(),
          absl::StrCat("recovering from a parameter server lost at the final "
                       "checkpoint (",
                       servers.message(), ")"),
          [&recovery](const std::string& why, const std::string& checkpoint) {
            return PauseAndRestore(recovery, why, checkpoint);
          })
          .status());
  return FinalSave::kTrainAgain;
}

// ---- Evaluate and Finish ---------------------------------------------------

absl::Status Chief::Evaluate() {
  FaultPoint("chief.final_evaluation");
  FinalEvaluationOptions evaluation;
  evaluation.has_evaluator = policy_.has_evaluator;
  evaluation.evaluator_timeout = policy_.final_evaluation_timeout;
  evaluation.cpu_threads = policy_.evaluation_threads;
  evaluation.final_checkpoint = final_checkpoint_;
  evaluation.keep_model = [this](bool wait_for_servers) {
    return KeepFinalModel(wait_for_servers);
  };
  return ObtainFinalEvaluation(evaluation, spec_, *parts_.client, coordinator_);
}

// A server that restarts after training lost the trained model's share it
// held; the final checkpoint holds exactly that model (nothing trains
// after it), so restoring it costs no step. The job is paused meanwhile:
// the evaluator does not pull a server between the creation of its
// variables and the restore, and a report whose pulls met the restore is
// refused (JobCoordinator::Evaluation).
absl::StatusOr<bool> Chief::KeepFinalModel(bool wait_for_servers) {
  const std::vector<absl::StatusOr<StatsResponse>> stats = watch_->Poll();
  const absl::Status servers = CheckParameterServers(
      stats, ExpectedVariablesPerServer(parts_.client->placement()));
  // One shutting down (SIGTERM) still holds its state; it is restored
  // once it comes back, if it does before the job ends.
  if (servers.ok() || ServerLeaving(servers).has_value()) return false;
  if (absl::IsAborted(servers)) {
    return absl::AbortedError(
        absl::StrCat("this chief no longer controls the parameter servers: ",
                     servers.message()));
  }
  const bool all_answer = absl::c_all_of(
      stats, [](const absl::StatusOr<StatsResponse>& s) { return s.ok(); });
  if (!all_answer && !wait_for_servers) return false;
  if (final_checkpoint_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        servers.message(),
        " after training ended, and the job saves no checkpoints, so the "
        "trained model is lost with it and cannot be evaluated; set "
        "checkpoint.directory so that a lost server can be recovered"));
  }
  const std::string why =
      absl::StrCat("restoring the final checkpoint: ", servers.message(),
                   " after training ended");
  LOG(WARNING) << "parameter server lost after training ended ("
               << servers.message() << "); restoring " << final_checkpoint_;
  coordinator_.SetActivity(absl::StrCat("restoring ", final_checkpoint_,
                                        " onto the parameter servers"));
  absl::StatusOr<int64_t> step =
      PauseAndRestore(Recovery(), why, final_checkpoint_);
  if (!step.ok()) {
    return absl::Status(
        step.status().code(),
        absl::StrCat("the final model could not be restored after a "
                     "parameter server was lost (",
                     servers.message(), "): ", step.status().message(),
                     " (the trained model is in ", final_checkpoint_, ")"));
  }
  return true;
}

absl::Status Chief::Finish(absl::Status result) {
  watch_.reset();  // the servers are about to stop
  MutexLock lock(&end_mu_);
  if (ended_) return stopped_;  // a signal's stop ended the job
  ended_ = true;
  EndJobLocked(result, result.ok() ? "job finished" : "job failed",
               absl::Seconds(10));
  return result;
}

void Chief::StopOnSignal(const std::string& signal) {
  // After a Finish under way, which is bounded too.
  MutexLock lock(&end_mu_);
  if (ended_) return;
  ended_ = true;
  const bool after = training_over_;
  if (awaiting_lost_server_) {
    stopped_ = absl::CancelledError(absl::StrCat(
        "stopped by ", signal, " during training, while ",
        coordinator_.activity(),
        "; start the job again with the same checkpoint directory to resume "
        "from its newest checkpoint"));
  } else if (supervising_) {
    // Signals during training go to the supervisor's save: the stop runs
    // here only when that save outlived its bound (termination.h).
    stopped_ = absl::CancelledError(absl::StrCat(
        "stopped by ", signal,
        " during training, without the checkpoint of the current step (it "
        "did not finish within chief --preemption_save_timeout_s, while ",
        coordinator_.activity(),
        "); start the job again with the same checkpoint directory to resume "
        "from its newest checkpoint"));
  } else {
    stopped_ = absl::CancelledError(
        absl::StrCat("stopped by ", signal, after ? " after" : " before",
                     " training (while ", coordinator_.activity(), ")",
                     after ? "" : "; start the job again to train it"));
  }
  LOG(WARNING) << stopped_.message()
               << ": failing the job and telling the parameter servers to "
                  "stop";
  EndJobLocked(stopped_,
               absl::StrCat("job stopped (", signal, " to the chief)"),
               policy_.stop_timeout);
}

void Chief::EndJobLocked(const absl::Status& result, const std::string& reason,
                         absl::Duration shutdown_timeout) {
  if (result.ok()) {
    coordinator_.Succeed();
  } else {
    coordinator_.Fail(std::string(result.message()));
  }
  if (!policy_.result_file.empty()) {
    absl::Status written = WriteResult();
    if (!written.ok()) LOG(ERROR) << written.message();
  }
  // Restore requests still waiting were answered as the outcome was
  // decided, and later ones are at once (JobCoordinator::RequestRestore).
  // Every parameter server is told to stop, even when the job failed
  // before it was set up, so no process outlives the job.
  LOG(INFO) << "stopping " << parts_.client->num_shards()
            << " parameter servers";
  coordinator_.SetActivity("stopping the parameter servers");
  absl::Status shutdown = parts_.client->ShutdownAll(reason, shutdown_timeout);
  coordinator_.servers().RecordShutdown(shutdown, parts_.clock->Now());
  if (!shutdown.ok()) LOG(WARNING) << shutdown.message();
  coordinator_.SetActivity(absl::StrCat(
      "waiting for the other tasks to hear that the job ended (at most ",
      absl::FormatDuration(policy_.outcome_wait), ")"));
  // Tasks still running hear the outcome at their next status request
  // (about once a second), finished workers at once in the answers to
  // their held reports (long polls); tasks that exited never ask again.
  std::vector<std::string> unaware = coordinator_.WaitForOutcomeHeard(
      parts_.clock->Now() + policy_.outcome_wait);
  if (!unaware.empty()) {
    LOG(WARNING) << "stopping without " << absl::StrJoin(unaware, ", ")
                 << " having heard the job's end; they will find the chief "
                    "gone and exit";
  }
  coordinator_.SetActivity("exiting");
}

absl::Status Chief::WriteResult() const {
  const std::string& path = policy_.result_file;
  StatusResponse status = coordinator_.Status();
  // Training's own time: up to its end when it ended, not the final save
  // and evaluation after it.
  const absl::Time trained_until =
      training_over_ && training_end_ > training_start_ ? training_end_
                                                        : parts_.clock->Now();
  std::string json = absl::StrCat(
      "{\"state\": ", JsonQuote(JobState_Name(status.state())),
      ", \"message\": ", JsonQuote(status.message()),
      ", \"global_step\": ", status.global_step(),
      ", \"total_steps\": ", status.total_steps(), ", \"training_seconds\": ",
      absl::StrFormat("%.3f",
                      absl::ToDoubleSeconds(trained_until - training_start_)));
  // The coordinator's global step counts the workers' reports; the final
  // checkpoint's is the servers' own count, which can differ by the
  // updates in flight when training ended.
  if (!final_checkpoint_.empty()) {
    absl::StrAppend(&json,
                    ", \"final_checkpoint\": ", JsonQuote(final_checkpoint_),
                    ", \"final_checkpoint_step\": ", final_checkpoint_step_);
  }
  if (std::optional<EvaluationReport> eval = coordinator_.last_evaluation();
      eval.has_value() && eval->final()) {
    absl::StrAppend(
        &json,
        ", \"test_accuracy\": ", absl::StrFormat("%.6f", eval->accuracy()),
        ", \"test_loss\": ", absl::StrFormat("%.6f", eval->loss()),
        ", \"per_class_accuracy\": [",
        absl::StrJoin(eval->per_class_accuracy(), ", ",
                      [](std::string* out, double a) {
                        absl::StrAppend(out, absl::StrFormat("%.6f", a));
                      }),
        "]");
    if (eval->has_auc()) {
      absl::StrAppend(&json,
                      ", \"test_auc\": ", absl::StrFormat("%.6f", eval->auc()));
    }
    absl::StrAppend(&json,
                    ", \"evaluated_by\": ", JsonQuote(eval->evaluated_by()),
                    ", \"evaluated_step\": ", eval->global_step());
  }
  json += "}\n";
  absl::Status written = WriteFileAtomically(path, json);
  if (!written.ok()) {
    return absl::Status(written.code(),
                        absl::StrCat("cannot write the result file ", path,
                                     ": ", written.message()));
  }
  return absl::OkStatus();
}

}  // namespace psflow
