#include "chief/recovery.h"

#include <algorithm>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "checkpoint/checkpoint_manager.h"
#include "checkpoint/paths.h"
#include "checkpoint/state_file.h"
#include "common/fault_point.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace psflow {

std::vector<int64_t> ExpectedVariablesPerServer(const Placement& placement) {
  std::vector<int64_t> expected(placement.bytes_per_ps.size());
  for (const PlacedVariable& v : placement.variables) {
    for (const VariablePart& p : v.parts) ++expected[p.ps];
  }
  return expected;
}

namespace {

constexpr absl::string_view kServerLeavingPayload =
    "psflow.io/chief/server-leaving";

}  // namespace

absl::Status CheckParameterServers(
    const std::vector<absl::StatusOr<StatsResponse>>& stats,
    const std::vector<int64_t>& expected) {
  for (size_t i = 0; i < stats.size(); ++i) {
    if (!stats[i].ok()) return stats[i].status();
    if (i < expected.size() && stats[i]->num_variables() < expected[i]) {
      return absl::UnavailableError(absl::StrCat(
          "ps-", i, " holds ", stats[i]->num_variables(), " of its ",
          expected[i], " variables: it restarted and lost its state"));
    }
  }
  for (size_t i = 0; i < stats.size(); ++i) {
    if (!stats[i]->terminating()) continue;
    absl::Status leaving = absl::UnavailableError(
        absl::StrCat("ps-", i,
                     " is shutting down (it received SIGTERM: its pod is "
                     "being evicted or preempted)"));
    leaving.SetPayload(kServerLeavingPayload, absl::Cord(absl::StrCat(i)));
    return leaving;
  }
  return absl::OkStatus();
}

std::optional<int> ServerLeaving(const absl::Status& status) {
  absl::optional<absl::Cord> index = status.GetPayload(kServerLeavingPayload);
  int ps = 0;
  if (!index.has_value() || !absl::SimpleAtoi(std::string(*index), &ps)) {
    return std::nullopt;
  }
  return ps;
}

absl::StatusOr<int64_t> PauseAndRestore(const RecoveryOptions& options,
                                        const std::string& why,
                                        const std::string& checkpoint) {
  JobCoordinator& coordinator = *options.coordinator;
  // Already PAUSED: the supervisor paused the workers itself first (to
  // save before a server leaves), and nothing else pauses.
  if (!coordinator.Pause(why) && coordinator.state() != PAUSED) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the job is not training (state ", JobState_Name(coordinator.state()),
        "); nothing to restore into"));
  }
  // How far training had come: the steps past the restored checkpoint are
  // trained again (the work the fault cost).
  const int64_t reached = coordinator.Status().global_step();
  LOG(INFO) << "pausing the workers at global step " << reached << ": " << why;
  if (options.spec->config().training().mode() == BOUNDED) {
    // A worker waiting for a slower one would not see the pause until its
    // pull's deadline: lift the bound (every worker rejoins it after the
    // restore, and the supervisor sends the real set again).
    std::vector<int> everyone(options.spec->num_workers());
    for (int i = 0; i < options.spec->num_workers(); ++i) everyone[i] = i;
    absl::Status lifted =
        options.client->ExcludeWorkers(everyone, absl::Seconds(2));
    if (!lifted.ok()) {
      LOG(WARNING) << "cannot lift the staleness bound for the pause: "
                   << lifted.message();
    }
  }
  Clock& clock = coordinator.clock();
  std::vector<std::string> unpaused =
      coordinator.WaitForWorkersPaused(clock.Now() + options.pause_timeout);
  if (!unpaused.empty()) {
    LOG(WARNING) << "not paused after "
                 << absl::FormatDuration(options.pause_timeout) << ": "
                 << absl::StrJoin(unpaused, ", ")
                 << "; restoring anyway (their next gradients are dropped "
                    "as stale or applied to the restored model)";
  }
  const std::string waiting = absl::StrCat(
      "waiting for the lost parameter servers to come back (at most ",
      absl::FormatDuration(options.ps_return_timeout),
      ", chief --ps_return_timeout_s) to restore ", checkpoint);
  LOG(WARNING) << waiting;
  coordinator.SetActivity(waiting);
  if (absl::Status back =
          options.await_servers(clock.Now() + options.ps_return_timeout);
      absl::IsCancelled(back)) {
    return back;  // a stop signal: no server is awaited any more
  } else if (!back.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "parameter servers did not come back within ",
        absl::FormatDuration(options.ps_return_timeout), ": ", back.message()));
  }
  // Tests hold the restarted server unconfigured here.
  FaultPoint("chief.restore_server");
  // Idempotent on servers that kept their variables; recreates them on a
  // restarted one.
  RETURN_IF_ERROR(options.client->Configure(options.spec->ps_config()));
  RETURN_IF_ERROR(options.client->CreateVariables());
  RETURN_IF_ERROR(options.client->CreateTables(
      {options.spec->tables().begin(), options.spec->tables().end()}));
  const absl::Time start = clock.Now();
  coordinator.SetActivity(absl::StrCat("restoring ", checkpoint));
  ASSIGN_OR_RETURN(
      int64_t step,
      RestoreCheckpoint(checkpoint, options.spec->config().optimizer(),
                        *options.client, options.ps_return_timeout));
  LOG(INFO) << "restored " << checkpoint << " in "
            << absl::FormatDuration(
                   absl::Trunc(clock.Now() - start, absl::Milliseconds(1)))
            << "; resuming at global step " << step
            << TrainAgainNote(reached, step, options.spec->total_steps());
  coordinator.Resume(step);
  return step;
}

std::string TrainAgainNote(int64_t reached, int64_t restored,
                           int64_t total_steps) {
  // Async pushes already in flight at the last step can carry the count
  // past the total; those steps are not trained again.
  reached = std::min(reached, total_steps);
  if (reached <= 0) return "";
  return absl::StrCat(" (the job had reached ", reached, ": ",
                      std::max<int64_t>(0, reached - restored),
                      " steps to train again)");
}

absl::StatusOr<RestoredCheckpoint> RestoreNewestIntactCheckpoint(
    const std::string& directory, const RestorePathFunction& restore) {
  ASSIGN_OR_RETURN(const std::vector<std::string> kept,
                   KeptCheckpointsNewestFirst(directory));
  if (kept.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no checkpoint in ", directory, " to restore"));
  }
  std::vector<std::string> damaged;  // names, newest first
  std::vector<std::string> why_damaged;
  absl::Status newest_error;
  for (const std::string& name : kept) {
    const std::string path = JoinPath(directory, name);
    absl::StatusOr<int64_t> step =
        IsDirectory(path)
            ? restore(path)
            : absl::StatusOr<int64_t>(absl::DataLossError(absl::StrCat(
                  path, " is gone, though the state file lists it")));
    if (step.ok()) {
      for (size_t i = 0; i < damaged.size(); ++i) {
        LOG(ERROR) << "skipped the damaged checkpoint "
                   << JoinPath(directory, damaged[i]) << " (" << why_damaged[i]
                   << "); restored the newest intact one, " << path
                   << ", at step " << *step
                   << " (`psctl ckpt verify` shows what is wrong)";
      }
      if (!damaged.empty()) {
        absl::StatusOr<std::vector<std::string>> moved =
            SetAsideCheckpoints(directory, damaged);
        if (moved.ok()) {
          if (!moved->empty()) {
            LOG(WARNING) << "kept the damaged checkpoints for inspection as "
                         << absl::StrJoin(*moved, ", ")
                         << "; they are no longer listed (delete them once "
                            "inspected)";
          }
        } else {
          LOG(WARNING) << "cannot set the damaged checkpoints aside: "
                       << moved.status().message();
        }
      }
      return RestoredCheckpoint{path, *step};
    }
    if (newest_error.ok()) newest_error = step.status();
    // Only damage that changed no server is skipped: anything else (a
    // server lost, a checkpoint of another model, a commit cut short)
    // would fail the older checkpoints too, or left the model unknown.
    if (!absl::IsDataLoss(step.status()) || IsPartlyRestored(step.status())) {
      return step.status();
    }
    LOG(ERROR) << "cannot restore " << path << ": " << step.status().message()
               << "; trying the next older kept checkpoint";
    damaged.push_back(name);
    why_damaged.push_back(std::string(step.status().message()));
  }
  return absl::Status(
      newest_error.code(),
      absl::StrCat(
          newest_error.message(),
          damaged.size() > 1
              ? absl::StrCat(
                    "; the older kept ",
                    damaged.size() == 2 ? "checkpoint (" : "checkpoints (",
                    absl::StrJoin(damaged.begin() + 1, damaged.end(), ", "),
                    damaged.size() == 2 ? ") is" : ") are", " damaged too")
              : ""));
}

absl::StatusOr<int64_t> RecoverFromNewestCheckpoint(
    const absl::Status& lost, const std::string& directory,
    const std::string& why, const RestoreFunction& restore) {
  absl::StatusOr<RestoredCheckpoint> restored = RestoreNewestIntactCheckpoint(
      directory, [&](const std::string& path) { return restore(why, path); });
  if (absl::IsNotFound(restored.status())) {
    return absl::UnavailableError(absl::StrCat(
        lost.message(), "; no checkpoint was saved yet to recover from"));
  }
  if (!restored.ok()) {
    return absl::Status(
        restored.status().code(),
        absl::StrCat("recovery failed: ", restored.status().message()));
  }
  return restored->step;
}

}  // namespace psflow
