// ps_server: one parameter-server task.
//
//   export TF_CONFIG='{"cluster": {...}, "task": {"type": "ps", "index": 0}}'
//   ps_server [--tf_config=<file or JSON>] [--bind_host=0.0.0.0]
//
// Listens on the port its TF_CONFIG entry names (on all interfaces by
// default, as TensorFlow does), serves until the chief's Shutdown RPC or
// SIGTERM/SIGINT, drains in-flight RPCs and exits 0. Exits 1 with a message
// naming the problem when the configuration is bad or the port is taken.
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "common/confined_path.h"
#include "common/float_mode.h"
#include "common/host_port.h"
#include "common/logging.h"
#include "common/metrics/metrics_registry.h"
#include "common/metrics/task_metrics_endpoint.h"
#include "common/port_file.h"
#include "common/process_setup.h"
#include "common/role_config.h"
#include "common/role_help.h"
#include "common/rpc/security_flags.h"
#include "common/rpc/transport_security.h"
#include "common/signals.h"
#include "common/timeout_flag.h"
#include "ps/apply_pool.h"
#include "ps/grpc_ps_server.h"
#include "ps/ps_metrics.h"
#include "ps/ps_system_metrics.h"
#include "ps/staleness_histogram.h"
#include "ps/termination_grace.h"
#include "ps/worker_clocks.h"

ABSL_FLAG(std::string, tf_config, "",
          "TF_CONFIG as inline JSON or a file path; defaults to the TF_CONFIG "
          "environment variable");
ABSL_FLAG(std::string, port_file, "",
          "If set, write the bound port here once serving (for launchers "
          "that use port 0)");
ABSL_FLAG(int64_t, chunk_bytes, 4 << 20,
          "Bytes per variable chunk: the unit of transfer, locking and sync "
          "aggregation (1-4 MB is best)");
ABSL_FLAG(bool, shared_memory, true,
          "Let workers and evaluators on this host move tensors through "
          "shared memory instead of loopback TCP (they fall back to TCP "
          "when they cannot)");
ABSL_FLAG(bool, shared_memory_ring, true,
          "Let those clients also send their pulls and pushes through a call "
          "ring in their shared memory (futex doorbells) instead of a gRPC "
          "call each (docs/wire-protocol.md, \"The call ring\")");
ABSL_FLAG(int32_t, metrics_port, -1,
          "Serve Prometheus metrics at http://<bind_host>:<port>/metrics (0: "
          "any free port, logged; -1: off)");
ABSL_FLAG(std::string, logdir, "",
          "Root of the server's event file (system metrics), "
          "<logdir>/<job name>/ps-<index>/; default: the job config's "
          "logging.log_dir, which the chief sends");
ABSL_FLAG(std::string, checkpoint_root, "",
          "Absolute directory under which this server saves and restores "
          "checkpoint files (created if missing); paths outside it, with "
          "\"..\" or through symlinks that leave it are refused. Default: "
          "the directory the server was started in (never /, which would "
          "confine nothing)");
ABSL_FLAG(int32_t, apply_threads, 0,
          "Threads a large push's optimizer apply is spread over (the "
          "serving thread and apply_threads - 1 pool threads): a chunk's "
          "floats split into ranges, a batch's chunks into groups; small "
          "pushes apply inline on the serving thread. Results are the same "
          "for any value. 0: this host's cores (the process's CPU "
          "affinity); 1: no apply threads. At most 256");
ABSL_FLAG(int64_t, max_variable_bytes, 0,
          "At most this many bytes of variables, values and optimizer slots "
          "(a create beyond it is refused with RESOURCE_EXHAUSTED before "
          "anything is allocated); 0: half of this machine's memory");
ABSL_FLAG(int64_t, rpc_memory_quota_bytes, 0,
          "At most this many bytes held by gRPC for this server's "
          "connections and calls, incoming messages still being received "
          "among them; past it the connections holding the most are closed, "
          "so clients that send half a message and stall cannot pin memory. "
          "0: an eighth of this machine's memory, at least 1 GiB");
ABSL_FLAG(int32_t, chief_timeout_s, 900,
          "Shut down (exit 1) when the chief, once heard from, has not "
          "called for this many seconds (it asks every second): a job whose "
          "chief died for good leaves no server behind. 0: never");
ABSL_FLAG(int32_t, startup_timeout_s, 900,
          "Shut down (exit 1) when no chief has called within this many "
          "seconds of the start: servers start first, but a job whose chief "
          "never came (it died at start-up, or its TF_CONFIG names other "
          "servers) leaves no server behind. 0: never");
ABSL_FLAG(int32_t, chief_takeover_s, 10,
          "One job, one chief: calls from a chief other than the one this "
          "server follows are refused until that one has been silent for "
          "this many seconds (it calls every second); then the new one "
          "takes over and the old one is refused. A restarted chief waits "
          "at most this long. 1 to 3600");
ABSL_FLAG(int32_t, termination_grace_s, 70,
          "On SIGTERM/SIGINT while a job uses this server: seconds it keeps "
          "serving so the chief can save a checkpoint first (the chief's "
          "shutdown ends it sooner; a second signal stops it at once). Keep "
          "it above the chief's --preemption_save_timeout_s and below "
          "Kubernetes' terminationGracePeriodSeconds");
ABSL_FLAG(int32_t, shutdown_grace_ms, 5000,
          "How long in-flight RPCs may finish after shutdown is requested");

namespace psflow {
namespace {

// --checkpoint_root, or the working directory: always a confinement, never
// "any path" (docs/operations.md, "Confined checkpoint paths").
absl::StatusOr<PathConfinement> CheckpointRootFromFlag() {
  std::string root = absl::GetFlag(FLAGS_checkpoint_root);
  const bool given = !root.empty();
  if (!given) {
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof(cwd)) == nullptr) {
      return absl::FailedPreconditionError(
          "cannot read the working directory, the default checkpoint root; "
          "pass --checkpoint_root=<the job's checkpoint directory>");
    }
    root = cwd;
  }
  absl::StatusOr<PathConfinement> confinement =
      PathConfinement::Create(root, "--checkpoint_root");
  if (!confinement.ok()) {
    return absl::Status(
        confinement.status().code(),
        absl::StrCat("--checkpoint_root: ", confinement.status().message()));
  }
  if (confinement->resolved_root() == "/") {
    return absl::InvalidArgumentError(absl::StrCat(
        given ? "--checkpoint_root=/" : "the working directory is / and",
        " would let a peer write and read any file of this host as a "
        "checkpoint; pass --checkpoint_root=<the job's checkpoint "
        "directory> (the Kubernetes manifests use /data/checkpoints)"));
  }
  return confinement;
}

int Run() {
  absl::StatusOr<TfConfig> role_config = LoadRoleConfig(
      absl::GetFlag(FLAGS_tf_config), TaskType::kPs, "ps_server");
  if (!role_config.ok()) {
    LOG(ERROR) << role_config.status().message();
    return 1;
  }
  const TfConfig& config = *role_config;
  absl::StatusOr<TransportSecurity> security =
      TransportSecurityFromFlags(config);
  if (!security.ok()) {
    LOG(ERROR) << security.status().message();
    return 1;
  }
  const std::string bind_host = BindHostFromFlags(*security, config);

  absl::StatusOr<HostPort> address = ParseHostPort(*config.TaskAddress());
  if (!address.ok()) {
    LOG(ERROR) << address.status().message();
    return 1;
  }
  const int64_t chunk_bytes = absl::GetFlag(FLAGS_chunk_bytes);
  if (chunk_bytes < 1024 || chunk_bytes > (64 << 20)) {
    LOG(ERROR) << "--chunk_bytes=" << chunk_bytes
               << " is out of range; use 1024 to 67108864 (1-4 MB is best)";
    return 1;
  }

  MetricsRegistry registry;
  absl::StatusOr<std::unique_ptr<PsMetrics>> ps_metrics =
      PsMetrics::Create(&registry);
  if (!ps_metrics.ok()) {
    LOG(ERROR) << ps_metrics.status().message();
    return 1;
  }
  GrpcParameterServer::Options options;
  options.core.apply_seconds = (*ps_metrics)->apply_seconds();
  options.listen_address = HostPort{bind_host, address->port}.ToString();
  options.core.chunk_bytes = chunk_bytes;
  options.core.max_variable_bytes = absl::GetFlag(FLAGS_max_variable_bytes);
  if (const int apply_threads = absl::GetFlag(FLAGS_apply_threads);
      apply_threads >= 0 && apply_threads <= 256) {
    options.core.apply_threads =
        apply_threads > 0 ? apply_threads : ApplyPool::HostCores();
  } else {
    LOG(ERROR) << "--apply_threads=" << apply_threads
               << " is out of range; use 0 (this host's cores) to 256";
    return 1;
  }
  // "Seconds, 0 for never" (common/timeout_flag.h).
  absl::StatusOr<absl::Duration> chief_silence_limit =
      ReadTimeoutFlag("chief_timeout_s", absl::GetFlag(FLAGS_chief_timeout_s),
                      ZeroSeconds::kNever);
  absl::StatusOr<absl::Duration> first_chief_limit = ReadTimeoutFlag(
      "startup_timeout_s", absl::GetFlag(FLAGS_startup_timeout_s),
      ZeroSeconds::kNever);
  for (const auto* limit : {&chief_silence_limit, &first_chief_limit}) {
    if (!limit->ok()) {
      LOG(ERROR) << limit->status().message();
      return 1;
    }
  }
  options.chief_silence_limit = *chief_silence_limit;
  options.first_chief_limit = *first_chief_limit;
  if (const int takeover = absl::GetFlag(FLAGS_chief_takeover_s);
      takeover >= 1 && takeover <= 3600) {
    options.chief_takeover_after = absl::Seconds(takeover);
  } else {
    LOG(ERROR) << "--chief_takeover_s=" << takeover
               << " is out of range; use 1 to 3600 seconds";
    return 1;
  }
  if (options.core.max_variable_bytes < 0) {
    LOG(ERROR) << "--max_variable_bytes=" << options.core.max_variable_bytes
               << " is negative; use 0 (half the memory) or a byte count";
    return 1;
  }
  if (options.core.max_variable_bytes == 0) {
    const int64_t pages = sysconf(_SC_PHYS_PAGES);
    const int64_t page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) {
      options.core.max_variable_bytes = pages / 2 * page;
    }
  }
  options.rpc_memory_quota_bytes = absl::GetFlag(FLAGS_rpc_memory_quota_bytes);
  if (options.rpc_memory_quota_bytes < 0 ||
      (options.rpc_memory_quota_bytes > 0 &&
       options.rpc_memory_quota_bytes < (int64_t{64} << 20))) {
    LOG(ERROR) << "--rpc_memory_quota_bytes=" << options.rpc_memory_quota_bytes
               << " is out of range; use 0 (an eighth of the memory) or at "
                  "least 67108864 (64 MiB: one bulk message needs room)";
    return 1;
  }
  if (options.rpc_memory_quota_bytes == 0) {
    const int64_t pages = sysconf(_SC_PHYS_PAGES);
    const int64_t page = sysconf(_SC_PAGESIZE);
    options.rpc_memory_quota_bytes = std::max<int64_t>(
        int64_t{1} << 30, pages > 0 && page > 0 ? pages / 8 * page : 0);
  }
  if (const int grace = absl::GetFlag(FLAGS_shutdown_grace_ms);
      grace >= 0 && grace <= 600000) {
    options.grace = absl::Milliseconds(grace);
  } else {
    LOG(ERROR) << "--shutdown_grace_ms=" << grace
               << " is out of range; use 0 to 600000 milliseconds";
    return 1;
  }
  if (const int grace = absl::GetFlag(FLAGS_termination_grace_s);
      grace < 0 || grace > 86400) {
    LOG(ERROR) << "--termination_grace_s=" << grace
               << " is out of range; use 0 to 86400 seconds";
    return 1;
  }
  options.shared_memory.enabled = absl::GetFlag(FLAGS_shared_memory);
  if (!absl::GetFlag(FLAGS_shared_memory_ring)) {
    options.shared_memory.max_rings = 0;
  }
  options.security = *security;
  absl::StatusOr<PathConfinement> confinement = CheckpointRootFromFlag();
  if (!confinement.ok()) {
    LOG(ERROR) << confinement.status().message();
    return 1;
  }
  LOG(INFO) << "checkpoint files only under " << confinement->root();
  options.checkpoint_root = *std::move(confinement);
  absl::StatusOr<std::unique_ptr<GrpcParameterServer>> server =
      GrpcParameterServer::Start(options);
  if (!server.ok()) {
    LOG(ERROR) << server.status().message();
    return 1;
  }
  LOG(INFO) << "serving on " << bind_host << ":" << (*server)->port()
            << " (TF_CONFIG address " << *config.TaskAddress() << ", "
            << config.cluster.NumTasks(TaskType::kPs) << " ps, "
            << config.cluster.NumTasks(TaskType::kWorker) << " workers)";
  LOG(INFO) << "large pushes apply over " << options.core.apply_threads
            << (options.core.apply_threads == 1 ? " thread" : " threads")
            << " (--apply_threads)";
  // Removed when Run returns.
  std::optional<PortFile> port_file;
  if (const std::string path = absl::GetFlag(FLAGS_port_file); !path.empty()) {
    absl::StatusOr<PortFile> written = PortFile::Write(path, (*server)->port());
    if (!written.ok()) {
      LOG(ERROR) << written.status().message();
      return 1;
    }
    port_file.emplace(*std::move(written));
  }
  ParameterServerCore* core = &(*server)->core();
  PsMetrics* metrics = ps_metrics->get();
  // The server's Stats, not the core's: shared-memory sessions and their
  // bytes are the transport's.
  GrpcParameterServer* serving = server->get();
  const auto refresher = registry.AddRefresher([serving, core, metrics] {
    absl::Status refreshed = metrics->Refresh(serving->Stats(), core->mode());
    if (!refreshed.ok()) LOG(WARNING) << "metrics: " << refreshed.message();
  });
  TaskMetricsEndpointOptions endpoint;
  endpoint.host = bind_host;
  endpoint.port = absl::GetFlag(FLAGS_metrics_port);
  endpoint.task_type = "ps";
  endpoint.task_index = config.task.index;
  endpoint.job_name = [core] { return core->job_name(); };
  absl::StatusOr<std::unique_ptr<TaskMetricsEndpoint>> metrics_endpoint =
      ServeTaskMetrics(&registry, endpoint);
  if (!metrics_endpoint.ok()) {
    LOG(ERROR) << metrics_endpoint.status().message();
    return 1;
  }
  PsSystemMetrics system_metrics(core, config.task.index,
                                 absl::GetFlag(FLAGS_logdir));
  // SIGTERM reaches every pod of a job Kubernetes stops, and Ctrl-C every
  // process of `psctl local`: a server of a running job keeps serving for
  // a while, so the chief's checkpoint before stopping (chief
  // --preemption_save_timeout_s) can still read it. The chief's shutdown
  // ends it sooner; a second signal, or a server no job uses, stops now.
  GrpcParameterServer* raw = server->get();
  auto stopping = std::make_shared<TerminationGrace>(
      [raw](const std::string& reason) { raw->RequestShutdown(reason); },
      [raw] { raw->MarkTerminating(); });
  const absl::Duration grace =
      absl::Seconds(absl::GetFlag(FLAGS_termination_grace_s));
  WatchTerminationSignals(
      [stopping, core, grace](const std::string& signal) {
        stopping->OnSignal(signal, grace, core->configuration().has_value());
      },
      Hangup::kStop);
  const std::string reason = (*server)->Wait();
  stopping->Stopped();
  StatsResponse stats = (*server)->core().Stats();
  LOG(INFO) << "stopped (" << reason << ") after " << stats.pulls()
            << " pulls and " << stats.pushes() << " pushes ("
            << stats.updates_applied() << " updates applied, "
            << stats.stale_gradients_dropped() << " stale dropped, "
            << stats.nonfinite_gradients_rejected() << " non-finite rejected)";
  LOG(INFO) << DescribeStaleness(stats);
  if (std::string bounded = DescribeBoundedWaits(stats); !bounded.empty()) {
    LOG(INFO) << bounded;
  }
  if ((*server)->chief_lost()) {
    LOG(ERROR) << "exiting: " << reason;
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace psflow

int main(int argc, char** argv) {
  // Before any thread starts, so all threads inherit the blocked signals.
  psflow::BlockTerminationSignals(psflow::Hangup::kStop);
  // Every thread inherits it: optimizers never meet subnormal slowdowns.
  psflow::EnableFlushToZero();
  psflow::SetUpProcessForBulkTransfers();
  psflow::HandleHelpRequest(
      argc, argv,
      "ps_server: a psflow parameter-server task (TF_CONFIG task ps i).\n"
      "  ps_server --tls_dir=<dir> --token_dir=<dir> "
      "[--tf_config=<file or JSON>] [--checkpoint_root=<dir>]");
  absl::ParseCommandLine(argc, argv);
  return psflow::Run();
}
