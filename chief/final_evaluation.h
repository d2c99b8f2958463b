// The job's final evaluation, as the chief ends a job that trained to its
// last step: the evaluator's, when the job has one and it delivers in time
// (its liveness tracked like a worker's); otherwise the chief evaluates
// the final model on the servers itself, so that a job reported SUCCEEDED
// always carries its final metrics. A job whose config names no test data
// has none to carry.
//
// Runs on the chief's main thread; the servers must still be serving.
#ifndef PSFLOW_CHIEF_FINAL_EVALUATION_H_
#define PSFLOW_CHIEF_FINAL_EVALUATION_H_

#include "absl/status/status.h"
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
};

// OK once the final metrics are recorded in `coordinator` (or the job has
// no test data). An error names why the chief's own evaluation failed
// (unreadable test data, a lost parameter server); the job then fails, as
// it cannot report its result.
absl::Status ObtainFinalEvaluation(const FinalEvaluationOptions& options,
                                   const JobSpec& spec, ParameterClient& client,
                                   JobCoordinator& coordinator);

}  // namespace psflow

#endif  // PSFLOW_CHIEF_FINAL_EVALUATION_H_
