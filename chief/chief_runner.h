// The chief's duties, as a library: the chief binary runs them, and so
// does worker 0 (on a thread) when the cluster has no "chief" job.
//
//  1. serve the Coordinator (tasks that come early hear "initializing");
//  2. wait for every parameter server's health (deadline; names each
//     missing task and address);
//  3. read the training data's shape, place the model's variables, send
//     the update rule, create the variables and restore the newest
//     checkpoint or initialize them;
//  4. wait for every worker to join (deadline; names the missing ones);
//  5. log progress and save checkpoints until training ends, declaring
//     silent workers lost; save the final checkpoint;
//  6. let the evaluator run its final evaluation (bounded), or run it
//     itself when there is no evaluator or it sent none;
//  7. shut the parameter servers down and tell every task the result.
#ifndef PSFLOW_CHIEF_CHIEF_RUNNER_H_
#define PSFLOW_CHIEF_CHIEF_RUNNER_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "chief/termination.h"
#include "common/metrics/metrics_registry.h"
#include "common/rpc/transport_security.h"
#include "common/tf_config.h"
#include "proto/job_config.pb.h"

namespace psflow {

struct ChiefOptions {
  TfConfig tf_config;
  // How every connection of the job is secured.
  TransportSecurity security;
  JobConfig job;
  std::string bind_host = "0.0.0.0";
  // Written once the Coordinator serves (for launchers using port 0).
  std::string port_file;
  absl::Duration startup_timeout = absl::Seconds(120);
  absl::Duration heartbeat_timeout = absl::Seconds(60);
  // SYNC: how long lost workers a step needs are waited for.
  absl::Duration worker_replacement_timeout = absl::Minutes(4);
  // How long a lost parameter server is waited for to come back before
  // the job fails.
  absl::Duration ps_return_timeout = absl::Minutes(5);
  absl::Duration final_evaluation_timeout = absl::Seconds(120);
  // If set, the job's outcome is written here as JSON when it ends:
  // {"state", "message", "global_step", "total_steps", "training_seconds",
  //  "test_accuracy", "test_loss", "per_class_accuracy", "test_auc" (binary
  //  models), "evaluated_by"} (test fields after a final evaluation: every
  //  SUCCEEDED job whose config names test data has one).
  std::string result_file;
  // Overrides the job's logging.log_dir for TensorBoard event files.
  std::string logdir;
  // Overrides the job's checkpoint.directory.
  std::string checkpoint_dir;
  // Progress lines at this interval.
  absl::Duration log_interval = absl::Seconds(2);
  // Optional: where the chief's Prometheus metrics go (chief_metrics.h).
  MetricsRegistry* metrics_registry = nullptr;
  // Write this process's system metrics into the chief's event file (the
  // chief binary; worker 0 running the chief's duties writes its own).
  bool system_metrics = false;
  // Optional: SIGINT/SIGTERM while training runs make the chief save a
  // checkpoint of the current step, then end the job; outside training
  // they end the job at once, failed, stopping the parameter servers and
  // releasing the checkpoint directory (termination.h). RunChief installs
  // its stop handler for its whole run.
  ChiefTermination* termination = nullptr;
};

// Runs the job to its end. OK when it succeeded; otherwise the reason,
// which every task also learns from the Coordinator.
absl::Status RunChief(const ChiefOptions& options);

}  // namespace psflow

#endif  // PSFLOW_CHIEF_CHIEF_RUNNER_H_
