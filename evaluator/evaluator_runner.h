// The evaluator process's work: join the job through the chief, load the
// held-out set, connect to the parameter servers and open the metrics
// file, then run an Evaluator (evaluator/evaluator.h) until the job ends.
#ifndef PSFLOW_EVALUATOR_EVALUATOR_RUNNER_H_
#define PSFLOW_EVALUATOR_EVALUATOR_RUNNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "client/ps_client.h"
#include "common/clock.h"
#include "common/metrics/metrics_registry.h"
#include "common/metrics/task_metrics_endpoint.h"
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
  // How long evaluations may keep failing for a lost or restarting
  // parameter server (the chief recovering the job) before it gives up.
  absl::Duration recovery_timeout = absl::Seconds(300);
  // Overrides the job's logging.log_dir for TensorBoard event files.
  std::string logdir;
  // Optional: where the evaluator's Prometheus metrics go
  // (psflow_evaluator_*), and where the job's name goes once known.
  MetricsRegistry* metrics_registry = nullptr;
  JobNameLabel* job_name = nullptr;
  // What its intervals and timeouts are measured on.
  Clock* clock = &RealClock();
};

// OK when the job succeeded (after the final evaluation); the job's error
// when it failed.
absl::Status RunEvaluator(const EvaluatorOptions& options);

}  // namespace psflow

#endif  // PSFLOW_EVALUATOR_EVALUATOR_RUNNER_H_
