#include "chief/training_supervisor.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpoint_manager.h"
#include "chief/recovery.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace psflow {

TrainingSupervisor::TrainingSupervisor(SupervisorParts parts,
                                       SupervisorPolicy policy,
                                       int64_t restored_step)
    : parts_(std::move(parts)),
      policy_(std::move(policy)),
      schedule_(policy_.checkpoint, restored_step, parts_.clock->Now()),
      start_(parts_.clock->Now()),
      next_log_(start_ + policy_.log_interval),
      next_server_check_(start_ + policy_.server_check_interval) {}

absl::Time TrainingSupervisor::NextTick() const {
  return std::min(
      {next_log_, next_server_check_, parts_.clock->Now() + policy_.max_tick});
}

absl::Status TrainingSupervisor::Supervise() {
  while (true) {
    // Looked at every tick (max_tick apart at most).
    if (std::optional<std::string> signal = StopSignal()) {
      return SaveAndStop(*signal);
    }
    // Woken early when a worker reports the next save's step.
    if (parts_.checkpoints != nullptr) {
      parts_.coordinator->WatchForStep(schedule_.NextStep(),
                                       policy_.checkpoint.save_every_steps());
    }
    if (parts_.coordinator->WaitForTrainingEnd(NextTick())) break;
    RETURN_IF_ERROR(Tick());
  }
  // A signal that came while the last steps ran was promised a save and a
  // stop (termination.h): keep it, rather than go on to the final work.
  if (std::optional<std::string> signal = StopSignal()) {
    return SaveAndStop(*signal);
  }
  // A last progress line and metrics, with the workers' final reports: a
  // job shorter than the log interval has them too.
  LogProgress(/*at_end=*/true);
  return absl::OkStatus();
}

absl::StatusOr<SavedCheckpoint> TrainingSupervisor::PauseAndSave(
    const std::string& why) {
  JobCoordinator& coordinator = *parts_.coordinator;
  if (coordinator.Pause(why)) {
    // The coordinator waits on the real clock.
    std::vector<std::string> unpaused = coordinator.WaitForWorkersPaused(
        parts_.clock->Now() + policy_.stop_pause_timeout);
    if (!unpaused.empty()) {
      LOG(WARNING) << "not paused after "
                   << absl::FormatDuration(policy_.stop_pause_timeout) << ": "
                   << absl::StrJoin(unpaused, ", ")
                   << " (stopped too, or slow); saving anyway";
    }
  }
  absl::StatusOr<SavedCheckpoint> saved = parts_.checkpoints->Save();
  if (parts_.checkpoint_metrics != nullptr) {
    parts_.checkpoint_metrics->Record(saved);
  }
  return saved;
}

absl::Status TrainingSupervisor::SaveAndStop(const std::string& signal) {
  JobCoordinator& coordinator = *parts_.coordinator;
  const std::string why = absl::StrCat("received ", signal);
  if (parts_.checkpoints == nullptr) {
    return absl::CancelledError(absl::StrCat(
        "stopped (", why,
        "); the job saves no checkpoints (checkpoint.directory), so a "
        "restart trains from the start"));
  }
  // A server gone (killed, its host lost) cannot be read: a save would
  // only wait out its bound (--preemption_save_timeout_s). Checked twice,
  // as WatchServers does; a server that is leaving still serves.
  absl::Status servers = parts_.check_servers();
  if (!servers.ok() && !ServerLeaving(servers).has_value()) {
    servers = parts_.check_servers();
  }
  if (!servers.ok() && !ServerLeaving(servers).has_value() &&
      !absl::IsAborted(servers)) {
    return absl::CancelledError(absl::StrCat(
        "stopped (", why, "); a parameter server is gone (", servers.message(),
        "), so the current step cannot be saved; start the job again with "
        "the same checkpoint directory to resume from its newest checkpoint"));
  }
  // Paused workers push nothing more: every step applied so far, and no
  // other, is in the checkpoint.
  LOG(WARNING) << why << ": pausing the workers and saving a checkpoint of "
               << "the current step before the job stops";
  coordinator.SetActivity("saving a checkpoint before stopping");
  absl::StatusOr<SavedCheckpoint> saved = PauseAndSave(why);
  if (!saved.ok()) {
    return absl::CancelledError(absl::StrCat(
        "stopped (", why, "); the checkpoint of the current step failed (",
        saved.status().message(),
        "); a restart resumes from the newest earlier checkpoint"));
  }
  LogSavedCheckpoint(*saved);
  return StoppedAfterSaving(why, *saved);
}

std::optional<std::string> TrainingSupervisor::StopSignal() const {
  if (!parts_.stop_requested) return std::nullopt;
  return parts_.stop_requested();
}

absl::Status TrainingSupervisor::StoppedAfterSaving(
    const std::string& why, const SavedCheckpoint& saved) {
  return absl::CancelledError(absl::StrCat(
      "stopped (", why, ") after saving ", saved.path, " at global step ",
      saved.step,
      "; start the job again with the same checkpoint directory to resume "
      "from it"));
}

absl::Status TrainingSupervisor::Tick() {
  // What `psctl status` shows between the saves, restores and waits below,
  // each of which names itself while it runs.
  parts_.coordinator->SetActivity("supervising training");
  if (parts_.clock->Now() >= next_log_) {
    LogProgress();
    next_log_ = parts_.clock->Now() + policy_.log_interval;
  }
  RETURN_IF_ERROR(ServeRestoreRequests());
  UpdateWorkerBound();
  RETURN_IF_ERROR(WatchServers());
  if (!SaveIfDue()) {
    // A save fails most often because a server was lost in it: look now,
    // not a check interval later, so training stops before it piles up
    // more steps that the restore will throw away.
    next_server_check_ = parts_.clock->Now();
    RETURN_IF_ERROR(WatchServers());
  }
  return absl::OkStatus();
}

void TrainingSupervisor::LogProgress(bool at_end) {
  const StatusResponse status = parts_.coordinator->Status();
  double rate = 0, loss = 0, accuracy = 0;
  int reporting = 0;
  for (const ProgressReport& r : parts_.coordinator->LastReports()) {
    if (r.local_steps() == 0 || (r.finished() && !at_end)) continue;
    rate += r.examples_per_sec();
    loss += r.loss();
    accuracy += r.accuracy();
    ++reporting;
  }
  if (reporting > 0) {
    loss /= reporting;
    accuracy /= reporting;
  }
  const double elapsed = absl::ToDoubleSeconds(parts_.clock->Now() - start_);
  const double fraction =
      status.total_steps() > 0
          ? static_cast<double>(status.global_step()) / status.total_steps()
          : 0;
  const double eta = fraction > 0 ? elapsed * (1 - fraction) / fraction : 0;
  if (parts_.metrics != nullptr && reporting > 0) {
    // Training metrics as the chief sees them, at the global step; "loss"
    // shares its tag with the evaluator's so the two share a chart.
    const int64_t step = status.global_step();
    absl::Status written = parts_.metrics->AddScalar("loss", step, loss);
    written.Update(parts_.metrics->AddScalar("accuracy", step, accuracy));
    written.Update(parts_.metrics->AddScalar("examples_per_sec", step, rate));
    written.Update(parts_.metrics->Flush());
    if (!written.ok()) {
      LOG(WARNING) << "cannot write the chief's metrics: " << written.message();
    }
  }
  LOG(INFO) << absl::StrFormat(
      "step %d/%d (%.0f%%), %.0f examples/s, loss %.4f, accuracy %.4f, "
      "ETA %.0fs",
      status.global_step(), status.total_steps(), 100 * fraction, rate, loss,
      accuracy, eta);
}

// A restore that failed while it was being checked changed nothing (it
// runs in two phases), so training resumes as it was; one that failed in
// its commit may have left the servers partly restored, which no training
// may build on: the job stops, naming the checkpoint to start again from.
absl::Status TrainingSupervisor::ServeRestoreRequests() {
  JobCoordinator& coordinator = *parts_.coordinator;
  while (std::optional<JobCoordinator::RestoreRequest> request =
             coordinator.TakeRestoreRequest()) {
    absl::StatusOr<int64_t> step =
        parts_.restore(absl::StrCat("restoring ", request->path, " on request"),
                       request->path);
    excluded_sent_.reset();  // A pause lifts the bound: send it again.
    if (step.ok()) {
      schedule_ =
          CheckpointSchedule(policy_.checkpoint, *step, parts_.clock->Now());
    } else if (IsPartlyRestored(step.status())) {
      request->done(step);
      return absl::DataLossError(absl::StrCat(
          "restore of ", request->path, " failed in its commit (",
          step.status().message(),
          "), so the parameter servers hold a partly restored model and "
          "training cannot go on from it; start the job again: it resumes "
          "from the newest checkpoint in its directory (or restore ",
          request->path, " once the servers have room or are back)"));
    } else {
      LOG(WARNING) << "restore of " << request->path
                   << " failed: " << step.status().message();
      coordinator.Resume(coordinator.Status().global_step());
    }
    request->done(step);
  }
  return absl::OkStatus();
}

absl::Status TrainingSupervisor::WatchServers() {
  if (parts_.clock->Now() < next_server_check_ ||
      parts_.coordinator->state() != TRAINING) {
    return absl::OkStatus();
  }
  absl::Status servers = parts_.check_servers();
  if (!servers.ok() && !absl::IsAborted(servers) &&
      !ServerLeaving(servers).has_value()) {
    // Once more before a server is declared lost: a failure can be this
    // chief's own connection, closed by the server's keepalive while the
    // chief did not run (a stopped process, a starved host); the second
    // check reconnects. A server really gone fails it too.
    LOG(WARNING) << "a parameter server check failed (" << servers.message()
                 << "); checking again before declaring it lost";
    servers = parts_.check_servers();
  }
  next_server_check_ = parts_.clock->Now() + policy_.server_check_interval;
  if (servers.ok()) {
    leaving_unsaved_.clear();
    return absl::OkStatus();
  }
  // A stop asked for while this tick ran (one signal often reaches the
  // chief and the servers together: a node drained, a killed psctl) is
  // the duty that wins: a save and a stop, never a recovery the job would
  // not live to finish.
  if (!absl::IsAborted(servers)) {
    if (std::optional<std::string> signal = StopSignal()) {
      return SaveAndStop(*signal);
    }
  }
  if (std::optional<int> ps = ServerLeaving(servers)) {
    if (absl::c_linear_search(leaving_unsaved_, *ps)) return absl::OkStatus();
    return SaveBeforeServerLeaves(*ps, servers);
  }
  if (absl::IsAborted(servers)) {
    // The servers follow another chief of this job now (ps/chief_fence.h):
    // nothing to recover, and nothing this chief may change.
    return absl::AbortedError(
        absl::StrCat("this chief no longer controls the parameter servers: ",
                     servers.message()));
  }
  return RecoverLostServer(servers);
}

void TrainingSupervisor::UpdateWorkerBound() {
  if (!parts_.exclude_workers) return;
  const std::vector<int> outside = parts_.coordinator->WorkersOutsideBound();
  if (outside == excluded_sent_ && parts_.clock->Now() < next_bound_refresh_)
    return;
  const bool changed = outside != excluded_sent_;
  absl::Status sent = parts_.exclude_workers(outside);
  next_bound_refresh_ = parts_.clock->Now() + policy_.server_check_interval;
  if (!sent.ok()) {
    // A lost server is WatchServers' business; retried next tick.
    if (changed) {
      LOG(WARNING) << "cannot update the bounded-staleness workers: "
                   << sent.message();
    }
    excluded_sent_.reset();
    return;
  }
  if (changed && !outside.empty()) {
    LOG(INFO) << "workers outside the staleness bound: "
              << absl::StrJoin(outside, ", ");
  }
  excluded_sent_ = outside;
}

absl::Status TrainingSupervisor::SaveBeforeServerLeaves(
    int ps, const absl::Status& leaving) {
  JobCoordinator& coordinator = *parts_.coordinator;
  if (parts_.checkpoints == nullptr || !parts_.shutdown_server) {
    LOG(WARNING) << leaving.message()
                 << "; without checkpoints (checkpoint.directory) nothing "
                    "can be saved before it goes";
    leaving_unsaved_.push_back(ps);
    return absl::OkStatus();
  }
  const std::string why = std::string(leaving.message());
  LOG(WARNING) << why << ": pausing the workers and saving a checkpoint "
               << "before it goes";
  coordinator.SetActivity(
      absl::StrCat("saving a checkpoint before ps-", ps, " shuts down"));
  absl::StatusOr<SavedCheckpoint> saved = PauseAndSave(why);
  if (!saved.ok()) {
    LOG(WARNING) << "the checkpoint before ps-" << ps
                 << " goes failed (training goes on; it is recovered from "
                    "the newest checkpoint once it is gone): "
                 << saved.status().message();
    leaving_unsaved_.push_back(ps);
    coordinator.Resume(coordinator.Status().global_step());
    return absl::OkStatus();
  }
  LogSavedCheckpoint(*saved);
  schedule_.Saved(saved->step, parts_.clock->Now());
  // Stopped while it saved: the job ends with this checkpoint (the chief
  // stops every server as it ends) rather than wait to restore it.
  if (std::optional<std::string> signal = StopSignal()) {
    return StoppedAfterSaving(absl::StrCat("received ", *signal), *saved);
  }
  absl::Status released = parts_.shutdown_server(
      ps, absl::StrCat("the chief saved ", saved->path, " before it goes"));
  if (!released.ok()) {
    LOG(WARNING) << "cannot tell ps-" << ps
                 << " to stop now (it stops when its grace runs out): "
                 << released.message();
  }
  // Gone first, so the restore below never writes into the leaving one.
  const absl::Time gone_by = parts_.clock->Now() + policy_.server_gone_timeout;
  while (parts_.clock->Now() < gone_by) {
    absl::Status servers = parts_.check_servers();
    if (!servers.ok() && !ServerLeaving(servers).has_value()) break;
    parts_.clock->SleepFor(absl::Milliseconds(200));
  }
  absl::StatusOr<int64_t> step =
      parts_.restore(absl::StrCat("restoring ", saved->path,
                                  ", saved before ps-", ps, " shut down"),
                     saved->path);
  excluded_sent_.reset();
  RETURN_IF_ERROR(step.status());
  schedule_ =
      CheckpointSchedule(policy_.checkpoint, *step, parts_.clock->Now());
  return absl::OkStatus();
}

// Waits for the lost server, restores the newest checkpoint everywhere,
// resumes; an error ends the job.
absl::Status TrainingSupervisor::RecoverLostServer(const absl::Status& lost) {
  LOG(WARNING) << "parameter server lost: " << lost.message();
  if (parts_.checkpoints == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        lost.message(),
        "; without checkpoints (checkpoint.directory) the model cannot be "
        "recovered"));
  }
  absl::StatusOr<int64_t> step = RecoverFromNewestCheckpoint(
      lost, parts_.checkpoints->directory(),
      absl::StrCat("recovering from a lost parameter server (", lost.message(),
                   ")"),
      parts_.restore);
  excluded_sent_.reset();
  RETURN_IF_ERROR(step.status());
  schedule_ =
      CheckpointSchedule(policy_.checkpoint, *step, parts_.clock->Now());
  return absl::OkStatus();
}

// A failed save does not end the job: training goes on and the next save
// is tried on schedule.
bool TrainingSupervisor::SaveIfDue() {
  if (parts_.checkpoints == nullptr) return true;
  const int64_t step = parts_.coordinator->Status().global_step();
  if (!schedule_.Due(step, parts_.clock->Now())) return true;
  absl::StatusOr<SavedCheckpoint> saved = parts_.checkpoints->Save();
  if (parts_.checkpoint_metrics != nullptr) {
    parts_.checkpoint_metrics->Record(saved);
  }
  schedule_.Saved(saved.ok() ? saved->step : step, parts_.clock->Now());
  if (saved.ok()) {
    LogSavedCheckpoint(*saved);
  } else {
    LOG(WARNING) << "checkpoint failed (training goes on; the next one is "
                    "tried on schedule): "
                 << saved.status().message();
  }
  return saved.ok();
}

void LogSavedCheckpoint(const SavedCheckpoint& saved) {
  LOG(INFO) << absl::StrFormat("saved %s (step %d, %.1f MB in %.2f s)",
                               saved.path, saved.step, saved.bytes / 1e6,
                               absl::ToDoubleSeconds(saved.elapsed));
}

}  // namespace psflow
