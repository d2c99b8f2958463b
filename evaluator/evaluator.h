// The evaluator's work: evaluate on the held-out set either each new
// checkpoint once (when the job saves checkpoints; the best is copied to
// <checkpoint dir>/best) or the live model at an interval (read-only,
// consistent pulls from the parameter servers); report each result to the
// chief; evaluate the final model when the chief says training ended (the
// final checkpoint), and return. Training never waits for the evaluator.
// Its status requests are long polls: the chief answers once the job's
// state changes or the next evaluation is due, so the final evaluation
// starts as soon as training ends.
//
// The Evaluator's parts come in from outside (evaluator_runner.h builds
// them for the real process), so tests drive it with in-process twins. It
// is run by one thread; its parts must outlive Run().
#ifndef PSFLOW_EVALUATOR_EVALUATOR_H_
#define PSFLOW_EVALUATOR_EVALUATOR_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "client/ps_client.h"
#include "common/clock.h"
#include "common/metrics/event_file_writer.h"
#include "common/metrics/metrics_registry.h"
#include "data/ctr_examples.h"
#include "data/dataset.h"
#include "evaluator/job_end_watch.h"
#include "model/device/device.h"
#include "proto/coordinator.pb.h"

namespace psflow {

class Evaluator {
 public:
  // Not owned. `metrics` may be null.
  struct Parts {
    const JobSpec* spec = nullptr;
    CoordinatorClient* coordinator = nullptr;
    ParameterClient* client = nullptr;  // configured for the job
    Device* device = nullptr;
    const Dataset* test = nullptr;
    // Click-through-rate models (tables): the held-out examples, used
    // instead of `test`. Evaluated on the live model (consistent dense
    // pulls, rows pulled without creating any), also when the job saves
    // checkpoints.
    const CtrExamples* ctr_test = nullptr;
    EventFileWriter* metrics = nullptr;
    // Optional Prometheus cells, set at every evaluation.
    struct LiveMetrics {
      GaugeCell* loss = nullptr;
      GaugeCell* accuracy = nullptr;
      GaugeCell* global_step = nullptr;
      CounterCell* evaluations = nullptr;
      // Optional: live evaluations skipped while a server recovered.
      CounterCell* skipped = nullptr;
    };
    const LiveMetrics* live = nullptr;
    // Optional: the watch the caller started before configuring the client
    // (evaluator_runner.cc), which also keeps the chief hearing from this
    // evaluator. Without one, Run() keeps its own while it runs.
    JobEndWatch* job_end_watch = nullptr;
    // What its intervals and timeouts are measured on.
    Clock* clock = &RealClock();
  };
  struct Policy {
    // Gives up when the chief cannot be reached for this long.
    absl::Duration chief_timeout = absl::Seconds(30);
    // Gives up sooner when the chief has been silent this long and no
    // parameter server answers either (the watch's look): the job ended
    // while this evaluator could not hear it (a stopped process), or the
    // cluster is gone.
    absl::Duration chief_silence_with_servers_down = absl::Seconds(10);
    // How often at most it asks the chief for the job's state (the chief
    // holds a request until the state changes or an evaluation is due).
    absl::Duration poll_interval = absl::Milliseconds(250);
    // How soon it asks again after the chief did not answer.
    absl::Duration retry_interval = absl::Milliseconds(500);
    // An evaluation blocked in a pull is cancelled once the job ended or
    // the chief has been silent this long (evaluator/job_end_watch.h);
    // the loop then asks the chief and ends as the job did.
    absl::Duration cancel_after_silence = absl::Seconds(5);
    // A live evaluation whose pull fails as a lost or restarting server's
    // does (unreachable, timed out, not configured yet, variables not
    // created yet) is skipped, not fatal: the evaluator waits for the
    // chief to recover the job, as the workers do, and tries again this
    // soon (at once when the chief resumes training with a restored
    // model). It gives up when pulls keep failing for recovery_timeout.
    absl::Duration recovery_retry_interval = absl::Seconds(1);
    absl::Duration recovery_timeout = absl::Seconds(300);
  };

  Evaluator(Parts parts, Policy policy) : parts_(parts), policy_(policy) {}

  // OK after the final evaluation of a job that succeeded (or at once when
  // it already had); Aborted with the job's error when it failed;
  // Unavailable when the chief stays silent past chief_timeout (or past
  // chief_silence_with_servers_down with every server silent); the pulls'
  // error when they fail for longer than recovery_timeout.
  absl::Status Run();

  // Live evaluations skipped because a parameter server could not serve
  // them (read from any thread while Run() runs).
  int64_t skipped_evaluations() const { return skipped_.load(); }

 private:
  // What Run() keeps from one round to the next (evaluator.cc).
  struct Loop;

  // Reads the best checkpoint's record so far (a restarted evaluator
  // keeps comparing against it).
  void LoadBest(Loop& loop);
  // The job's state from the chief (or the watch, when the chief ended
  // the job and exited); nullopt when it did not answer, Unavailable once
  // it has been silent for chief_timeout.
  absl::StatusOr<std::optional<StatusResponse>> AskTheChief(Loop& loop);
  // How long the next request asks the chief to hold its answer while
  // nothing changes: until the next evaluation is due.
  absl::Duration WaitForChange(const Loop& loop) const;
  // Notes the model's generation; after a restore by the chief, a skipped
  // live evaluation is tried again at once.
  void NoteGeneration(Loop& loop, const StatusResponse& status);
  // This round's evaluation, if one is due (`final`: the chief is waiting
  // for the final one); nullopt when none is due or it was skipped.
  absl::StatusOr<std::optional<EvaluationReport>> EvaluateIfDue(Loop& loop,
                                                                bool final);
  // With checkpoints: the newest one when due; for the final evaluation,
  // the last one evaluated, else the live model when `live_due`.
  absl::StatusOr<std::optional<EvaluationReport>> EvaluateCheckpointsIfDue(
      Loop& loop, bool final, bool live_due);
  // The newest checkpoint, unless it was evaluated already.
  absl::StatusOr<std::optional<EvaluationReport>> EvaluateNewCheckpoint(
      Loop& loop);
  // Evaluates the checkpoint at `path` and keeps it if it is the best so
  // far; nullopt when it vanished (retention) or is damaged: skipped.
  absl::StatusOr<std::optional<EvaluationReport>> EvaluateCheckpointAt(
      Loop& loop, const std::string& path);
  // Evaluates the live model; nullopt when the watch cancelled it (the
  // loop's next status check says what became of the job) or a server's
  // outage skipped it.
  absl::StatusOr<std::optional<EvaluationReport>> EvaluateLive(Loop& loop);
  // A live evaluation that failed for a server's outage (`cause`): OK when
  // it is skipped and retried later, the error once the outage outlasts
  // recovery_timeout.
  absl::Status SkipForOutage(Loop& loop, const absl::Status& cause);
  // Marks `report` final or not and reports it to the chief, then logs it
  // and sets the metrics; the report's delivery. ABORTED: the chief
  // refused it (it restored the model while the pulls ran), nothing is
  // logged or charted as the model's, and the evaluation is to be made
  // again.
  absl::Status Publish(EvaluationReport& report, bool final);
  // The report's scalars into parts_.metrics (not null).
  void WriteMetrics(const EvaluationReport& report);

  const Parts parts_;
  const Policy policy_;
  std::atomic<int64_t> skipped_{0};
};

}  // namespace psflow

#endif  // PSFLOW_EVALUATOR_EVALUATOR_H_
