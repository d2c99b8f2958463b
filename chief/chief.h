// The chief's decisions, as a class over parts it is given. The chief
// binary (chief_runner.cc) wires the real parts: gRPC clients of the
// parameter servers, the checkpoint directory, the system clock. Tests
// give in-process twins and a fake clock, so each decision is checked
// without processes or waiting:
//
//   Prepare   configure the servers as this job's chief (waiting out a
//             crashed predecessor's claim), create the variables, then
//             resume the model the servers hold (a restarted chief),
//             restore the newest checkpoint, or initialize a fresh model
//             and save it as the initial checkpoint;
//   Train     wait for every worker, supervise training to its end
//             (TrainingSupervisor: progress, saves, restores, lost
//             servers), save the final checkpoint; a server lost at that
//             save sends the workers back to the restored step;
//   Evaluate  the final evaluation: the evaluator's, or the chief's own;
//   Finish    record the outcome, stop the servers, let the tasks hear it.
//
// Run() does all four in order. One thread calls a Chief (but
// StopOnSignal, from any); everything in ChiefParts must outlive it.
#ifndef PSFLOW_CHIEF_CHIEF_H_
#define PSFLOW_CHIEF_CHIEF_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "checkpoint/checkpoint_manager.h"
#include "chief/chief_metrics.h"
#include "chief/job_coordinator.h"
#include "chief/recovery.h"
#include "chief/server_watch.h"
#include "chief/termination.h"
#include "client/ps_client.h"
#include "common/clock.h"
#include "common/metrics/event_file_writer.h"
#include "common/mutex.h"
#include "model/model.h"
#include "proto/coordinator.pb.h"

namespace psflow {

// What the chief works with; nothing is owned.
struct ChiefParts {
  JobCoordinator* coordinator = nullptr;
  // Placed for the job's variables (Finish alone needs only its shards).
  ParameterClient* client = nullptr;
  // Null: the job keeps no checkpoints (a lost server then ends it).
  CheckpointManager* checkpoints = nullptr;
  // Every wait and deadline is measured on it (the coordinator's too).
  Clock* clock = &RealClock();
  // Returns once every parameter server answers its health check;
  // Unavailable naming the missing ones at the deadline.
  AwaitServersFunction await_servers;
  // Optional.
  EventFileWriter* metrics = nullptr;
  const CheckpointMetrics* checkpoint_metrics = nullptr;
  ChiefTermination* termination = nullptr;
};

struct ChiefPolicy {
  // From the Chief's construction: how long the parameter servers get to
  // answer and accept this chief, and the workers to join.
  absl::Duration startup_timeout = absl::Seconds(120);
  // How long lost parameter servers are waited for to come back.
  absl::Duration ps_return_timeout = absl::Minutes(5);
  // How long the evaluator's final evaluation is waited for at most.
  absl::Duration final_evaluation_timeout = absl::Seconds(120);
  absl::Duration log_interval = absl::Seconds(2);
  // The cluster has an evaluator task.
  bool has_evaluator = false;
  // Threads for the chief's own final evaluation.
  int evaluation_threads = 1;
  // If set, the job's outcome is written here as JSON (chief_runner.h).
  std::string result_file;
  // How long the other tasks get to hear the outcome before Finish returns.
  absl::Duration outcome_wait = absl::Seconds(5);
  // StopOnSignal: how long the parameter servers get to hear the stop
  // (the tasks then get outcome_wait).
  absl::Duration stop_timeout = absl::Seconds(5);
};

class Chief {
 public:
  // `spec` is the one every task receives (its ps_config configures the
  // servers); `model` defines the variables' initial values. A Chief
  // built without a model can only Finish (a job that failed before it
  // was planned still stops its servers).
  Chief(ChiefParts parts, ChiefPolicy policy, JobSpec spec,
        const ModelDefinition* model);
  ~Chief();

  Chief(const Chief&) = delete;
  Chief& operator=(const Chief&) = delete;

  // Prepare, Train, Evaluate (each only if the previous succeeded), then
  // Finish with the first error: OK when the job succeeded.
  absl::Status Run();

  // Sets the job's model up on the servers (see above) and opens the job
  // to the workers (the coordinator's spec).
  absl::Status Prepare();
  // OK once training ended and its final checkpoint is saved. Workers
  // that have not joined by the startup deadline fail the job, unless
  // training already reached its end without them (a restored, finished
  // job).
  absl::Status Train();
  absl::Status Evaluate();
  // Ends the job with `result` (see above); returns it. Once StopOnSignal
  // ended the job, returns the stop's cause instead and does nothing.
  absl::Status Finish(absl::Status result);

  // A signal outside training (termination.h), from its own thread while
  // this Chief's thread may be anywhere (waiting for servers or workers,
  // initializing, saving, evaluating): ends the job now, in bounded time,
  // as Finish does: the job fails ("stopped by SIGTERM before training
  // (while <activity>)", or "after training"), the result is written, the
  // parameter servers are told to stop (policy stop_timeout) and the tasks
  // get outcome_wait to hear it. Returns once done (after Finish, when it
  // is under way); does nothing once the job ended.
  void StopOnSignal(const std::string& signal);

  // The step of the newest checkpoint of this job the model started from
  // (restored, or the initial one); -1 when none.
  int64_t restored_step() const { return restored_step_; }

 private:
  enum class FinalSave { kSaved, kTrainAgain };

  // What the servers hold when this chief starts (Prepare).
  struct ServerStates;
  absl::StatusOr<ServerStates> ReadServerStates();
  absl::Status ConfigureServers(absl::Time deadline);
  absl::StatusOr<bool> ResumeExistingModel();
  absl::Status InitializeModel();
  absl::Status AwaitWorkers(absl::Time deadline);
  absl::Status SuperviseTraining();
  absl::StatusOr<FinalSave> SaveFinalCheckpoint();
  // After training: false while every server holds its variables; when one
  // restarted and lost them, restores the final checkpoint onto all
  // (pausing the final evaluation) and returns true. A server that does
  // not answer is waited for (ps_return_timeout) only with
  // `wait_for_servers`; else false. An error when the model cannot be
  // recovered (no checkpoints, the server does not come back, another
  // chief took over).
  absl::StatusOr<bool> KeepFinalModel(bool wait_for_servers);
  // OK when every server answers holding its variables (recovery.h).
  absl::Status CheckServers();
  RecoveryOptions Recovery() const;
  // Finish's part after the watch: the outcome, the result, the servers'
  // stop (each call bounded by `shutdown_timeout`), the tasks' hearing.
  void EndJobLocked(const absl::Status& result, const std::string& reason,
                    absl::Duration shutdown_timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(end_mu_);
  absl::Status WriteResult() const ABSL_SHARED_LOCKS_REQUIRED(end_mu_);

  const ChiefParts parts_;
  const ChiefPolicy policy_;
  JobSpec spec_;
  const ModelDefinition* const model_;
  JobCoordinator& coordinator_;
  const absl::Time startup_deadline_;
  int64_t restored_step_ = -1;
  // The final checkpoint (SaveFinalCheckpoint): the trained model, which
  // KeepFinalModel restores; empty when the job saves none.
  std::string final_checkpoint_;
  // The global step the final checkpoint holds (its servers' count).
  int64_t final_checkpoint_step_ = -1;
  // Polls the servers' Stats from Prepare's end to Finish.
  std::unique_ptr<ServerWatch> watch_;
  // Training ended (the supervisor returned): a signal now stops the job
  // "after training".
  std::atomic<bool> training_over_{false};
  // The TrainingSupervisor runs (a signal then asks it for a save).
  std::atomic<bool> supervising_{false};
  // Training waits for a lost server to come back (set by Recovery()'s
  // wait): a signal then ends the job at once (StopOnSignal).
  mutable std::atomic<bool> awaiting_lost_server_{false};
  // The Cancelled status of a lost-server wait a signal cut short.
  absl::Status StoppedWaiting(const std::string& signal) const;
  // Orders Finish and StopOnSignal: the job ends once.
  mutable Mutex end_mu_;
  bool ended_ ABSL_GUARDED_BY(end_mu_) = false;
  // What StopOnSignal ended the job with.
  absl::Status stopped_ ABSL_GUARDED_BY(end_mu_);
  absl::Time training_start_ ABSL_GUARDED_BY(end_mu_);
  // When supervised training last returned (InfinitePast: not yet).
  absl::Time training_end_ ABSL_GUARDED_BY(end_mu_) = absl::InfinitePast();
};

}  // namespace psflow

#endif  // PSFLOW_CHIEF_CHIEF_H_
