// The chief's duties while the workers train, one Tick at a time:
//
//  - logging progress (and writing the chief's training metrics);
//  - serving `psctl ckpt restore` requests: pause, restore, resume;
//  - watching the parameter servers and recovering from a lost one by
//    restoring the newest checkpoint everywhere;
//  - saving checkpoints on schedule;
//  - in BOUNDED mode, telling the parameter servers which workers no
//    longer bound the others (lost, finished, never joined);
//  - on a stop request (SIGTERM/SIGINT to the chief: a preemption),
//    pausing the workers and saving a checkpoint of the current step
//    before the job ends, so a restarted job loses no applied step.
//
// Everything it acts on is passed in (the coordinator, the checkpoint
// manager, the server check and the restore procedure, the clock), so its
// decisions are unit-tested without processes, sockets or waiting.
#ifndef PSFLOW_CHIEF_TRAINING_SUPERVISOR_H_
#define PSFLOW_CHIEF_TRAINING_SUPERVISOR_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "checkpoint/checkpoint_manager.h"
#include "chief/checkpoint_schedule.h"
#include "chief/chief_metrics.h"
#include "chief/job_coordinator.h"
#include "common/clock.h"
#include "common/metrics/event_file_writer.h"
#include "proto/job_config.pb.h"

namespace psflow {

struct SupervisorParts {
  JobCoordinator* coordinator = nullptr;
  // Null: the job keeps no checkpoints (a lost server then ends it).
  CheckpointManager* checkpoints = nullptr;
  // Null: no metrics are written, only logged.
  EventFileWriter* metrics = nullptr;
  // OK when every parameter server answers holding its variables;
  // otherwise Unavailable naming the lost one (CheckParameterServers), or
  // Aborted when the servers follow another chief (ends the job here).
  std::function<absl::Status()> check_servers;
  // Pauses the workers, restores `checkpoint` onto every server and
  // resumes; returns the global step resumed at. On error the job stays
  // paused (PauseAndRestore).
  std::function<absl::StatusOr<int64_t>(const std::string& why,
                                        const std::string& checkpoint)>
      restore;
  // Optional: records every save's outcome (Prometheus).
  const CheckpointMetrics* checkpoint_metrics = nullptr;
  // BOUNDED mode only (null otherwise): tells every parameter server the
  // workers outside the bound (ParameterClient::ExcludeWorkers).
  std::function<absl::Status(const std::vector<int>&)> exclude_workers;
  // The clock the schedule, the ticks and every wait are measured on
  // (the coordinator's).
  Clock* clock = &RealClock();
  // Optional: tells parameter server `ps` to stop (it said it is shutting
  // down, and the chief saved what it holds). Without it, a server that
  // says so is recovered only once it is gone.
  std::function<absl::Status(int ps, const std::string& reason)>
      shutdown_server;
  // Optional: what asked the chief to stop ("SIGTERM"), once something
  // did (chief/termination.h).
  std::function<std::optional<std::string>()> stop_requested;
};

struct SupervisorPolicy {
  CheckpointConfig checkpoint;  // the schedule (every N steps / seconds)
  absl::Duration log_interval = absl::Seconds(10);
  absl::Duration server_check_interval = absl::Seconds(1);
  // The longest sleep between ticks: short enough for step-based
  // checkpoints and restore requests to be served promptly.
  absl::Duration max_tick = absl::Milliseconds(250);
  // On a stop request: how long the workers get to pause (report that
  // they stopped pushing) before the checkpoint is saved anyway. Workers
  // stopped by the same signal never report; they push nothing either.
  absl::Duration stop_pause_timeout = absl::Seconds(5);
  // After telling a leaving server to stop: how long until it is gone
  // before its restore is tried anyway (the restore waits for it to be
  // back).
  absl::Duration server_gone_timeout = absl::Seconds(30);
};

class TrainingSupervisor {
 public:
  // `restored_step` is the step a restored checkpoint resumed at (-1 on a
  // fresh start), so the schedule does not save it again at once.
  TrainingSupervisor(SupervisorParts parts, SupervisorPolicy policy,
                     int64_t restored_step);

  // Runs every duty that is due now. An error ends the job: a lost server
  // that could not be recovered.
  absl::Status Tick();

  // When the next Tick is due.
  absl::Time NextTick() const;

  // Ticks until the coordinator says training is over (finished or
  // failed), waking when the coordinator's state changes or a tick is due.
  // A stop request ends it with Cancelled, after SaveAndStop.
  absl::Status Supervise();

 private:
  // `at_end`: training ended; workers' final reports count too.
  void LogProgress(bool at_end = false);
  // Error only when a restore left the servers partly restored: the job
  // cannot go on from that model.
  absl::Status ServeRestoreRequests();
  absl::Status WatchServers();
  // Sends the workers outside the bound when they changed, and about every
  // server_check_interval anyway (a restarted server starts with none).
  void UpdateWorkerBound();
  absl::Status RecoverLostServer(const absl::Status& lost);
  // A server said it is shutting down: pause, save, let it go, and
  // restore that checkpoint once it is back (no applied step lost).
  absl::Status SaveBeforeServerLeaves(int ps, const absl::Status& leaving);
  // False when a save was due and failed.
  bool SaveIfDue();
  // The stop request's duty: pause, save the current step, and return
  // Cancelled saying what was saved (the job then ends with it).
  absl::Status SaveAndStop(const std::string& signal);
  // What asked the chief to stop, once something did (stop_requested).
  std::optional<std::string> StopSignal() const;
  // The Cancelled status a stop after a save ends the job with.
  static absl::Status StoppedAfterSaving(const std::string& why,
                                         const SavedCheckpoint& saved);
  // Pauses the workers (waiting at most stop_pause_timeout for them to
  // say so) and saves a checkpoint; the job stays paused.
  absl::StatusOr<SavedCheckpoint> PauseAndSave(const std::string& why);

  SupervisorParts parts_;
  SupervisorPolicy policy_;
  CheckpointSchedule schedule_;
  absl::Time start_;
  absl::Time next_log_;
  absl::Time next_server_check_;
  // What exclude_workers last delivered, and when it is due again.
  std::optional<std::vector<int>> excluded_sent_;
  // Leaving servers whose save failed: recovered once they are gone.
  std::vector<int> leaving_unsaved_;
  absl::Time next_bound_refresh_;
};

// "saved <path> (step N, X MB in Y s)" in the log.
void LogSavedCheckpoint(const SavedCheckpoint& saved);

}  // namespace psflow

#endif  // PSFLOW_CHIEF_TRAINING_SUPERVISOR_H_
