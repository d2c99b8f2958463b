// The job's final evaluation, as the chief ends a job that trained to its
// last step: the evaluator's, when the job has one and it delivers in time
// (its liveness tracked like a worker's); otherwise the chief evaluates
// the final model itself (an image model from the final checkpoint's
// files, as the evaluator does; else the live model on the servers), so
// that a job reported SUCCEEDED always carries its final metrics. A job
// whose config names no test data has none to carry.
//
// Runs on the chief's main thread; the servers must still be serving.
#ifndef PSFLOW_CHIEF_FINAL_EVALUATION_H_
#define PSFLOW_CHIEF_FINAL_EVALUATION_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chief/job_coordinator.h"
#include "client/ps_client.h"
#include "proto/coordinator.pb.h"

namespace psflow {

struct FinalEvaluationOptions {
  bool has_evaluator = false;  // the cluster has an "evaluator" job
  // How long the evaluator's final evaluation is waited for at most (a
  // silent evaluator is given up on sooner: the heartbeat timeout).
  absl::Duration evaluator_timeout = absl::Seconds(120);
  int cpu_threads = 1;  // the chief's own evaluation runs on the CPU
  // The final checkpoint, if the job saved one: the chief's own evaluation
  // of an image model reads its files (the numbers the evaluator gives,
  // and no parameter server needed); a click-through-rate model's rows
  // come from the servers.
  std::string final_checkpoint;
  // Keeps the final model on the servers (Chief::KeepFinalModel): restores
  // the final checkpoint onto every server when one restarted and lost its
  // state, and says whether it did; an error fails the job. Called every
  // check_interval while the evaluator's report is awaited, with
  // `wait_for_servers` false: a server that does not answer is not waited
  // for then (an evaluator of checkpoint files does without it); and when
  // the chief's own evaluation failed, with true: the servers are waited
  // for (bounded), as that evaluation needs them. Unset: nothing is
  // checked.
  std::function<absl::StatusOr<bool>(bool wait_for_servers)> keep_model;
  absl::Duration check_interval = absl::Seconds(1);
};

// OK once the final metrics are recorded in `coordinator` (or the job has
// no test data). Moves the job to FINAL_EVALUATION first. A restore of the
// final model meanwhile gives the evaluator its full time again. An error
// names why the chief's own evaluation failed (unreadable test data, a
// parameter server lost for good); the job then fails, as it cannot report
// its result.
absl::Status ObtainFinalEvaluation(const FinalEvaluationOptions& options,
                                   const JobSpec& spec, ParameterClient& client,
                                   JobCoordinator& coordinator);

}  // namespace psflow

#endif  // PSFLOW_CHIEF_FINAL_EVALUATION_H_
