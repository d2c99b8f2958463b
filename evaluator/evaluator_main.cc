// evaluator: evaluates the job's model on held-out data at an interval
// and once more after training ends (see evaluator_runner.h).
//
//   evaluator [--tf_config=<file or JSON>] [--device=auto|cpu|cuda]
//
// Exits 0 when the job succeeded, 1 with the reason otherwise.
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/grpc_coordinator_client.h"
#include "common/host_port.h"
#include "common/logging.h"
#include "common/process_setup.h"
#include "common/role_config.h"
#include "common/rpc/health_server.h"
#include "common/rpc/security_flags.h"
#include "common/rpc/transport_security.h"
#include "evaluator/evaluator_runner.h"
#include "model/device/cpu/blas_kernels.h"
#include "model/device/select_device.h"

ABSL_FLAG(std::string, tf_config, "",
          "TF_CONFIG as inline JSON or a file path; defaults to $TF_CONFIG");
ABSL_FLAG(std::string, device, "auto", "auto, cpu or cuda");
ABSL_FLAG(std::string, logdir, "",
          "TensorBoard root; overrides the job's logging.log_dir");
ABSL_FLAG(int32_t, startup_timeout_s, 120, "Seconds to wait for the chief");
ABSL_FLAG(int32_t, recovery_timeout_s, 300,
          "Seconds to ride out failing parameter-server calls (a lost "
          "server, the chief restoring it), or a chief that does not "
          "answer while the servers do, before giving up");
ABSL_FLAG(int32_t, metrics_port, -1,
          "Serve Prometheus metrics at http://<bind_host>:<port>/metrics (0: "
          "any free port, logged; -1: off)");

namespace psflow {
namespace {

int Run() {
  absl::StatusOr<TfConfig> role_config = LoadRoleConfig(
      absl::GetFlag(FLAGS_tf_config), TaskType::kEvaluator, "evaluator");
  if (!role_config.ok()) {
    LOG(ERROR) << role_config.status().message();
    return 1;
  }
  const TfConfig& tf = *role_config;
  absl::StatusOr<TransportSecurity> security = TransportSecurityFromFlags(tf);
  if (!security.ok()) {
    LOG(ERROR) << security.status().message();
    return 1;
  }
  const std::string bind_host = BindHostFromFlags(*security, tf);

  std::unique_ptr<ServerRunner> health;
  if (std::optional<std::string> address = tf.TaskAddress()) {
    absl::StatusOr<HostPort> own = ParseHostPort(*address);
    absl::StatusOr<std::unique_ptr<ServerRunner>> server =
        own.ok() ? StartHealthServer(HostPort{bind_host, own->port}.ToString(),
                                     *security)
                 : absl::StatusOr<std::unique_ptr<ServerRunner>>(own.status());
    if (!server.ok()) {
      LOG(ERROR) << server.status().message();
      return 1;
    }
    health = *std::move(server);
  }
  absl::StatusOr<std::unique_ptr<Device>> device =
      SelectDevice(absl::GetFlag(FLAGS_device), 1);
  if (!device.ok()) {
    LOG(ERROR) << device.status().message();
    return 1;
  }
  const TaskId chief = tf.ChiefTask();
  absl::StatusOr<std::string> chief_found = tf.ChiefAddress();
  if (!chief_found.ok()) {
    LOG(ERROR) << chief_found.status().message()
               << "; the evaluator follows the job through its chief";
    return 1;
  }
  const std::string chief_address = *std::move(chief_found);
  GrpcCoordinatorClient coordinator(
      chief_address, absl::StrCat(chief.ToString(), " at ", chief_address),
      *security, tf.task, chief.ToString());
  EvaluatorOptions options;
  options.tf_config = tf;
  options.security = *security;
  options.device = device->get();
  options.coordinator = &coordinator;
  options.logdir = absl::GetFlag(FLAGS_logdir);
  options.startup_timeout =
      absl::Seconds(absl::GetFlag(FLAGS_startup_timeout_s));
  options.recovery_timeout =
      absl::Seconds(absl::GetFlag(FLAGS_recovery_timeout_s));
  // A chief restarting (or stopped a while) is waited for as the workers
  // wait for it, while the servers still answer; with them silent too, the
  // evaluator gives up much sooner (Evaluator::Policy).
  options.chief_timeout = options.recovery_timeout;
  MetricsRegistry registry;
  JobNameLabel job_name;
  options.metrics_registry = &registry;
  options.job_name = &job_name;
  TaskMetricsEndpointOptions endpoint;
  endpoint.host = bind_host;
  endpoint.port = absl::GetFlag(FLAGS_metrics_port);
  endpoint.task_type = "evaluator";
  endpoint.task_index = tf.task.index;
  endpoint.job_name = [&job_name] { return job_name.Get(); };
  absl::StatusOr<std::unique_ptr<TaskMetricsEndpoint>> metrics_endpoint =
      ServeTaskMetrics(&registry, endpoint);
  if (!metrics_endpoint.ok()) {
    LOG(ERROR) << metrics_endpoint.status().message();
    return 1;
  }
  absl::Status result = RunEvaluator(options);
  if (health != nullptr) health->Drain(absl::ZeroDuration());
  if (!result.ok()) {
    LOG(ERROR) << result.message();
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace psflow

int main(int argc, char** argv) {
  // Before anything else: it may start this binary again.
  psflow::UseFastBlasKernels(argv);
  psflow::StartRoleProcess(
      argc, argv,
      "evaluator: the psflow job's evaluator (TF_CONFIG task evaluator 0): "
      "metrics on held-out data.\n  evaluator --tls_dir=<dir> "
      "--token_dir=<dir> [--tf_config=<file or JSON>]");
  return psflow::Run();
}
