// chief: coordinates a psflow job (see chief_runner.h).
//
//   chief --job=configs/fashion_mnist_mlp.json [--tf_config=<file or JSON>]
//
// Exits 0 when the job succeeded, 1 with the reason otherwise, 128 + the
// signal when SIGINT/SIGTERM stopped it: during training after the
// preemption save, outside it after failing the job and stopping the
// parameter servers (bounded; termination.h).
#include <atomic>
#include <cstdlib>
#include <string>
#include <tuple>

#include "absl/flags/flag.h"
#include "chief/chief_runner.h"
#include "chief/termination.h"
#include "common/job/job_config.h"
#include "common/logging.h"
#include "common/metrics/metrics_registry.h"
#include "common/metrics/task_metrics_endpoint.h"
#include "common/process_setup.h"
#include "common/role_config.h"
#include "common/rpc/security_flags.h"
#include "common/rpc/transport_security.h"
#include "common/signals.h"
#include "common/timeout_flag.h"
#include "model/device/cpu/blas_kernels.h"

ABSL_FLAG(int32_t, metrics_port, -1,
          "Serve Prometheus metrics at http://<bind_host>:<port>/metrics (0: "
          "any free port, logged; -1: off)");
ABSL_FLAG(std::string, tf_config, "",
          "TF_CONFIG as inline JSON or a file path; defaults to $TF_CONFIG");
ABSL_FLAG(std::string, job, "", "Job config (JSON); required");
ABSL_FLAG(std::string, result_file, "",
          "As chief: write the job's outcome here as JSON");
ABSL_FLAG(std::string, port_file, "", "Write the bound port here");
ABSL_FLAG(std::string, logdir, "",
          "TensorBoard root; overrides the job's logging.log_dir");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "As chief: checkpoint directory; overrides the job's "
          "checkpoint.directory");
ABSL_FLAG(int32_t, startup_timeout_s, 120,
          "Seconds to wait for parameter servers and workers");
ABSL_FLAG(int32_t, heartbeat_timeout_s, 60,
          "Seconds of silence after which a worker is declared lost");
ABSL_FLAG(int32_t, ps_return_timeout_s, 300,
          "Seconds to wait for a lost parameter server to come back (it is "
          "then restored from the newest checkpoint) before the job fails");
ABSL_FLAG(int32_t, worker_replacement_timeout_s, 240,
          "Sync jobs: seconds to wait for lost workers that a step needs to "
          "come back (restarted, they register again) before the job fails");
ABSL_FLAG(int32_t, preemption_save_timeout_s, 60,
          "On SIGTERM/SIGINT during training: seconds the checkpoint of the "
          "current step may take; past them the chief ends the job without "
          "it (the result says so, the servers are told to stop; at most 15 "
          "s more). Keep Kubernetes' terminationGracePeriodSeconds above "
          "both");

namespace {
// Set once flags are parsed; a signal before that exits at once.
std::atomic<psflow::ChiefTermination*> termination{nullptr};
}  // namespace

int main(int argc, char** argv) {
  // Before anything else: it may start this binary again.
  psflow::UseFastBlasKernels(argv);
  psflow::StartRoleProcess(
      argc, argv,
      "chief: the psflow job's chief task (TF_CONFIG task chief 0): plans the "
      "job, configures the parameter servers, saves checkpoints.\n  chief "
      "--job=<job.json> --tls_dir=<dir> --token_dir=<dir> [--tf_config=<file "
      "or JSON>]",
      [](const std::string& signal) {
        if (psflow::ChiefTermination* t = termination.load()) {
          t->OnSignal(signal);
          return;
        }
        LOG(ERROR) << "received " << signal << "; exiting";
        std::_Exit(128 + psflow::TerminationSignalNumber(signal));
      });
  using namespace psflow;
  // Each must be positive: 0 or less would declare every worker or server
  // lost at once (common/timeout_flag.h).
  ChiefOptions options;
  for (const auto& [name, seconds, timeout] :
       {std::tuple("startup_timeout_s", absl::GetFlag(FLAGS_startup_timeout_s),
                   &options.startup_timeout),
        std::tuple("heartbeat_timeout_s",
                   absl::GetFlag(FLAGS_heartbeat_timeout_s),
                   &options.heartbeat_timeout),
        std::tuple("worker_replacement_timeout_s",
                   absl::GetFlag(FLAGS_worker_replacement_timeout_s),
                   &options.worker_replacement_timeout),
        std::tuple("ps_return_timeout_s",
                   absl::GetFlag(FLAGS_ps_return_timeout_s),
                   &options.ps_return_timeout)}) {
    absl::StatusOr<absl::Duration> read =
        ReadTimeoutFlag(name, seconds, ZeroSeconds::kRefused);
    if (!read.ok()) {
      LOG(ERROR) << read.status().message();
      return 1;
    }
    *timeout = *read;
  }
  absl::StatusOr<TfConfig> role_config = LoadRoleConfig(
      absl::GetFlag(FLAGS_tf_config), TaskType::kChief, "chief",
      " (without a chief job, worker 0 runs the chief's duties)");
  if (!role_config.ok()) {
    LOG(ERROR) << role_config.status().message();
    return 1;
  }
  absl::StatusOr<TransportSecurity> security =
      TransportSecurityFromFlags(*role_config);
  if (!security.ok()) {
    LOG(ERROR) << security.status().message();
    return 1;
  }
  const std::string bind_host = BindHostFromFlags(*security, *role_config);
  if (absl::GetFlag(FLAGS_job).empty()) {
    LOG(ERROR) << "--job is required: the job config (e.g. "
                  "configs/fashion_mnist_mlp.json)";
    return 1;
  }
  absl::StatusOr<JobConfig> job = LoadJobConfigFile(absl::GetFlag(FLAGS_job));
  if (!job.ok()) {
    LOG(ERROR) << job.status().message();
    return 1;
  }
  options.tf_config = *role_config;
  options.security = *security;
  options.job = *job;
  options.bind_host = bind_host;
  options.result_file = absl::GetFlag(FLAGS_result_file);
  options.logdir = absl::GetFlag(FLAGS_logdir);
  options.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  options.port_file = absl::GetFlag(FLAGS_port_file);
  MetricsRegistry registry;
  options.metrics_registry = &registry;
  options.system_metrics = true;
  TaskMetricsEndpointOptions endpoint;
  endpoint.host = options.bind_host;
  endpoint.port = absl::GetFlag(FLAGS_metrics_port);
  endpoint.task_type = "chief";
  endpoint.task_index = role_config->task.index;
  const std::string job_name = job->name();
  endpoint.job_name = [job_name] { return job_name; };
  absl::StatusOr<std::unique_ptr<TaskMetricsEndpoint>> metrics_endpoint =
      ServeTaskMetrics(&registry, endpoint);
  if (!metrics_endpoint.ok()) {
    LOG(ERROR) << metrics_endpoint.status().message();
    return 1;
  }
  if (absl::GetFlag(FLAGS_preemption_save_timeout_s) <= 0) {
    LOG(ERROR) << "--preemption_save_timeout_s must be positive (seconds "
                  "the checkpoint before a stop may take; default 60)";
    return 1;
  }
  static ChiefTermination chief_termination(
      absl::Seconds(absl::GetFlag(FLAGS_preemption_save_timeout_s)));
  termination.store(&chief_termination);
  options.termination = &chief_termination;
  absl::Status result = RunChief(options);
  if (!result.ok()) {
    if (chief_termination.requested().has_value()) {
      LOG(WARNING) << "job " << result.message();
      return chief_termination.ExitCode(1);
    }
    LOG(ERROR) << "job failed: " << result.message();
    return 1;
  }
  LOG(INFO) << "job succeeded";
  return 0;
}
