// The evaluator's loop: join the job through the chief, then evaluate on
// the held-out set either each new checkpoint once (when the job saves
// checkpoints; the best is copied to <checkpoint dir>/best) or the live
// model at an interval (read-only, consistent pulls from the parameter
// servers); report each result to the chief, evaluate the final model when
// the chief says training ended (the final checkpoint), and exit.
// Training never waits for the evaluator.
#ifndef PSFLOW_EVALUATOR_EVALUATOR_RUNNER_H_
#define PSFLOW_EVALUATOR_EVALUATOR_RUNNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "client/ps_client.h"
#include "common/rpc/transport_security.h"
#include "common/tf_config.h"
#include "data/dataset.h"
#include "model/device/device.h"
#include "proto/coordinator.pb.h"

namespace psflow {

struct EvaluatorOptions {
  TfConfig tf_config;
  TransportSecurity security;
  Device* device = nullptr;
  CoordinatorClient* coordinator = nullptr;
  absl::Duration startup_timeout = absl::Seconds(120);
  // Gives up when the chief cannot be reached for this long.
  absl::Duration chief_timeout = absl::Seconds(30);
  // Overrides the job's logging.log_dir for TensorBoard event files.
  std::string logdir;
};

// OK when the job succeeded (after the final evaluation); the job's error
// when it failed.
absl::Status RunEvaluator(const EvaluatorOptions& options);

// One evaluation of the model in `client` on `data` (every example).
absl::StatusOr<EvaluationReport> EvaluateOnce(const JobSpec& spec,
                                              ParameterClient& client,
                                              Device& device,
                                              const Dataset& data);

// One evaluation of the checkpoint at `path` (its values, CRC-checked).
absl::StatusOr<EvaluationReport> EvaluateCheckpoint(const JobSpec& spec,
                                                    const std::string& path,
                                                    Device& device,
                                                    const Dataset& data);

// One evaluation of the model's variables given as `values` (in the
// model's variable order), reported at `global_step`.
absl::StatusOr<EvaluationReport> EvaluateValues(
    const JobSpec& spec, const std::vector<std::vector<float>>& values,
    int64_t global_step, Device& device, const Dataset& data);

}  // namespace psflow

#endif  // PSFLOW_EVALUATOR_EVALUATOR_RUNNER_H_
