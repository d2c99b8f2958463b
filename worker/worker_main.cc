// worker: trains on its shard of the data (see trainer.h).
//
//   worker [--tf_config=<file or JSON>] [--device=auto|cpu|cuda]
//          [--job=<file>  (only when worker 0 runs the chief's duties)]
//
// Without a "chief" job in TF_CONFIG, worker 0 also runs the chief's
// duties (TensorFlow and TFJob semantics) and needs --job. Exits 0 when
// the job succeeded, 1 with the reason otherwise; worker 0 running the
// chief's duties exits 128 + the signal after saving on SIGTERM/SIGINT.
#include <atomic>
#include <cstdlib>
#include <optional>
#include <random>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "chief/chief_runner.h"
#include "chief/termination.h"
#include "client/grpc_coordinator_client.h"
#include "common/file_util.h"
#include "common/host_cores.h"
#include "common/host_port.h"
#include "common/job/job_config.h"
#include "common/logging.h"
#include "common/metrics/event_file_writer.h"
#include "common/metrics/gpu_monitor.h"
#include "common/metrics/metrics_registry.h"
#include "common/metrics/system_metrics_logger.h"
#include "common/metrics/task_metrics_endpoint.h"
#include "common/mutex.h"
#include "common/process_setup.h"
#include "common/role_config.h"
#include "common/rpc/health_server.h"
#include "common/rpc/security_flags.h"
#include "common/rpc/transport_security.h"
#include "common/signals.h"
#include "common/status_macros.h"
#include "model/device/cpu/blas_kernels.h"
#include "model/device/select_device.h"
#include "worker/training_job.h"
#include "worker/worker_metrics.h"

ABSL_FLAG(std::string, tf_config, "",
          "TF_CONFIG as inline JSON or a file path; defaults to $TF_CONFIG");
ABSL_FLAG(std::string, job, "",
          "Job config, needed only when this worker runs the chief's duties");
ABSL_FLAG(std::string, device, "auto", "auto, cpu or cuda");
ABSL_FLAG(std::string, logdir, "",
          "TensorBoard root; overrides the job's logging.log_dir");
ABSL_FLAG(std::string, result_file, "",
          "As chief: write the job's outcome here as JSON");
ABSL_FLAG(int32_t, preemption_save_timeout_s, 60,
          "Worker 0 running the chief's duties: on SIGTERM/SIGINT during "
          "training, seconds the checkpoint of the current step may take "
          "before it exits without it");
ABSL_FLAG(int32_t, recovery_timeout_s, 300,
          "Seconds to ride out failing parameter-server or chief calls "
          "(a lost server, a pause) before giving up");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "As chief: checkpoint directory; overrides the job's "
          "checkpoint.directory");
ABSL_FLAG(double, slowdown, 1,
          "For experiments: make this worker a straggler whose every step "
          "takes this many times its compute time (it sleeps for the "
          "difference). 1 is full speed");
ABSL_FLAG(int32_t, slowdown_period_ms, 0,
          "With --slowdown: 0 slows every step; otherwise the workers take "
          "turns, each slowed for this many milliseconds out of every "
          "num_workers times as many (transient stragglers)");
ABSL_FLAG(std::string, background_calls, "auto",
          "For a model with embedding tables outside sync mode, start the "
          "step's calls (the next batch's rows pull, the pushes, the dense "
          "prefetch) on a background thread while the step computes: on, "
          "off, or auto (on when the process may use at least 4 cores)");
ABSL_FLAG(bool, push_then_pull, true,
          "Async mode (not bounded), calls started on the training thread: "
          "send each step's push and the pull that follows it as one call "
          "(the server answers the push with the parameters after it); "
          "false: a push and a pull, as releases before protocol 5 did");
ABSL_FLAG(int32_t, metrics_port, -1,
          "Serve Prometheus metrics at http://<bind_host>:<port>/metrics (0: "
          "any free port, logged; -1: off)");
ABSL_FLAG(int32_t, startup_timeout_s, 120,
          "Seconds to wait for the chief (and, as chief, for the cluster)");

namespace psflow {
// Set when this worker runs the chief's duties; a signal before that (or
// to any other worker) exits at once.
std::atomic<ChiefTermination*> termination{nullptr};
}  // namespace psflow

namespace psflow {
namespace {

absl::StatusOr<Slowdown> SlowdownFromFlags() {
  Slowdown slowdown;
  slowdown.factor = absl::GetFlag(FLAGS_slowdown);
  slowdown.period = absl::Milliseconds(absl::GetFlag(FLAGS_slowdown_period_ms));
  if (!(slowdown.factor >= 1) || slowdown.factor > 1000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--slowdown=", slowdown.factor,
        " is outside [1, 1000]; 1 is full speed, 3 makes each step take "
        "three times as long"));
  }
  if (slowdown.period < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--slowdown_period_ms is negative; use 0 (always slow) or a turn "
        "length in milliseconds");
  }
  return slowdown;
}

// --background_calls: auto turns the trainer's background thread on where
// the process has cores to spare. On a saturated 2-core machine (2 workers
// and a server) the thread's handoffs cost more than they hide; on a
// 16-core GPU host it took the CTR job's rows setup, a quarter of each
// step, off the step (bench/RESULTS.md, "Calls started off the training
// thread").
constexpr int kBackgroundCallsMinCores = 4;

absl::StatusOr<bool> BackgroundCallsFromFlag() {
  const std::string value = absl::GetFlag(FLAGS_background_calls);
  if (value == "on") return true;
  if (value == "off") return false;
  if (value == "auto") {
    const int cores = UsableCores();
    LOG(INFO) << "--background_calls=auto: " << cores << " usable cores: "
              << (cores >= kBackgroundCallsMinCores ? "on" : "off")
              << " (on from " << kBackgroundCallsMinCores
              << ", for models with embedding tables)";
    return cores >= kBackgroundCallsMinCores;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--background_calls=", value,
      " is not auto, on or off (auto: on when the process may use at least ",
      kBackgroundCallsMinCores, " cores)"));
}

// Worker 0 without a chief job runs the chief's duties: their options,
// from this worker's flags. SIGTERM/SIGINT during training then saves a
// checkpoint of the current step before the job stops
// (chief/termination.h).
absl::StatusOr<ChiefOptions> ChiefDutiesOptions(
    const TfConfig& tf, const TransportSecurity& security,
    const std::string& bind_host, absl::Duration startup,
    MetricsRegistry* registry) {
  if (absl::GetFlag(FLAGS_job).empty()) {
    return absl::InvalidArgumentError(
        "this worker runs the chief's duties (TF_CONFIG has no \"chief\" "
        "job) and needs --job=<job config>");
  }
  if (absl::GetFlag(FLAGS_preemption_save_timeout_s) <= 0) {
    return absl::InvalidArgumentError(
        "--preemption_save_timeout_s must be positive (seconds the "
        "checkpoint before a stop may take; default 60)");
  }
  ChiefOptions options;
  ASSIGN_OR_RETURN(options.job, LoadJobConfigFile(absl::GetFlag(FLAGS_job)));
  options.tf_config = tf;
  options.security = security;
  options.bind_host = bind_host;
  options.result_file = absl::GetFlag(FLAGS_result_file);
  options.logdir = absl::GetFlag(FLAGS_logdir);
  options.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  options.startup_timeout = startup;
  options.metrics_registry = registry;
  static ChiefTermination chief_termination(
      absl::Seconds(absl::GetFlag(FLAGS_preemption_save_timeout_s)));
  options.termination = &chief_termination;
  termination.store(&chief_termination);
  return options;
}

// Joins the job through the chief, retrying until `startup` is spent; but
// when this process's own chief has already returned (it failed at start,
// before this part joined), there is nobody left to join: nullopt.
absl::StatusOr<std::optional<JobSpec>> JoinTheJob(
    GrpcCoordinatorClient& coordinator, const TaskId& self,
    uint64_t incarnation, absl::Duration startup, bool own_chief,
    const Notification& own_chief_done) {
  const absl::Time give_up = absl::Now() + startup;
  absl::StatusOr<JobSpec> spec;
  do {
    spec = coordinator.Register(
        self, incarnation,
        own_chief ? std::min(give_up, absl::Now() + absl::Seconds(1))
                  : give_up);
  } while (!spec.ok() && absl::IsDeadlineExceeded(spec.status()) && own_chief &&
           !own_chief_done.HasBeenNotified() && absl::Now() < give_up);
  if (spec.ok()) return std::optional<JobSpec>(*std::move(spec));
  // This process's own chief ended before this part joined: its result is
  // the job's, not a failure to join.
  if (own_chief_done.HasBeenNotified()) return std::optional<JobSpec>();
  return spec.status();
}

// What a worker records besides training: its event file (training
// scalars where logging.worker_metrics asks for them), its system metrics
// and, on a GPU, NVML's readings. Each is optional: a worker without one
// says so and trains on.
struct Telemetry {
  std::unique_ptr<EventFileWriter> events;
  std::unique_ptr<GpuMonitor> gpus;
  std::unique_ptr<MetricsRegistry::RefresherHandle> gpu_export;
  std::unique_ptr<SystemMetricsLogger> system;
};

Telemetry StartTelemetry(const JobSpec& spec, const TfConfig& tf,
                         const Device& device, MetricsRegistry* served) {
  Telemetry t;
  absl::StatusOr<std::unique_ptr<EventFileWriter>> writer =
      EventFileWriter::Create(MetricsDir(
          spec.config(), absl::GetFlag(FLAGS_logdir), tf.task.ToString()));
  if (writer.ok()) {
    t.events = *std::move(writer);
  } else {
    LOG(WARNING) << "no metrics: " << writer.status().message();
  }
  // NVML is loaded at run time: without a driver the worker says so once.
  if (device.kind() == DeviceKind::kCuda) {
    absl::StatusOr<std::unique_ptr<GpuMonitor>> opened = GpuMonitor::Open();
    if (opened.ok()) {
      t.gpus = *std::move(opened);
      if (served != nullptr) {
        absl::StatusOr<std::unique_ptr<MetricsRegistry::RefresherHandle>>
            exported = ExportGpuMetrics(served, t.gpus.get());
        if (exported.ok()) t.gpu_export = *std::move(exported);
      }
    } else {
      LOG(WARNING) << "no GPU metrics: " << opened.status().message();
    }
  }
  if (t.events != nullptr) {
    SystemMetricsLogger::Options system_options;
    system_options.gpus = t.gpus.get();
    t.system = SystemMetricsLogger::StartOrWarn(DirName(t.events->path()),
                                                system_options);
  }
  return t;
}

// What the worker's flags and TF_CONFIG say, checked.
struct WorkerSetup {
  TfConfig tf;
  Slowdown slowdown;
  // TrainerOptions::background_calls (--background_calls).
  bool background_calls = true;
  TransportSecurity security;
  std::string bind_host;
  absl::Duration startup;
  std::string listen;  // this task's address, on bind_host
};

// This worker's part in the job `spec` describes, on `device` (widened
// to training.cpu_threads on a CPU), to the job's end.
absl::Status Train(const WorkerSetup& setup, const JobSpec& spec,
                   std::unique_ptr<Device> device,
                   GrpcCoordinatorClient& coordinator, uint64_t incarnation,
                   const WorkerMetrics* live_metrics, MetricsRegistry* served) {
  const TfConfig& tf = setup.tf;
  const TransportSecurity& security = setup.security;
  const Slowdown& slowdown = setup.slowdown;
  if (spec.config().training().cpu_threads() > 1 &&
      device->kind() == DeviceKind::kCpu) {
    ASSIGN_OR_RETURN(
        device, SelectDevice("cpu", spec.config().training().cpu_threads()));
  }
  Telemetry telemetry = StartTelemetry(spec, tf, *device, served);
  TrainingJobOptions options;
  if (spec.config().logging().worker_metrics() !=
          LoggingConfig::WORKER_ZERO_ONLY ||
      tf.task.index == 0) {
    options.metrics = telemetry.events.get();
  }
  options.tf_config = tf;
  options.security = security;
  options.spec = spec;
  options.device = device.get();
  options.coordinator = &coordinator;
  options.incarnation = incarnation;
  options.recovery.recovery_timeout =
      absl::Seconds(absl::GetFlag(FLAGS_recovery_timeout_s));
  options.slowdown = slowdown;
  options.background_calls = setup.background_calls;
  options.push_then_pull = absl::GetFlag(FLAGS_push_then_pull);
  // Only when served: otherwise the trainer skips the clock reads.
  options.live_metrics = live_metrics;
  if (slowdown.factor > 1) {
    LOG(WARNING) << "slowed down " << slowdown.factor << "x (--slowdown)"
                 << (slowdown.period > absl::ZeroDuration()
                         ? absl::StrCat(" in turns of ",
                                        absl::FormatDuration(slowdown.period),
                                        " with the other workers")
                         : "")
                 << ": this worker is a deliberate straggler";
  }
  return RunTrainingJob(options);
}

absl::StatusOr<WorkerSetup> LoadWorkerSetup() {
  WorkerSetup setup;
  ASSIGN_OR_RETURN(setup.tf, LoadRoleConfig(absl::GetFlag(FLAGS_tf_config),
                                            TaskType::kWorker, "worker"));
  ASSIGN_OR_RETURN(setup.slowdown, SlowdownFromFlags());
  ASSIGN_OR_RETURN(setup.background_calls, BackgroundCallsFromFlag());
  ASSIGN_OR_RETURN(setup.security, TransportSecurityFromFlags(setup.tf));
  setup.bind_host = BindHostFromFlags(setup.security, setup.tf);
  setup.startup = absl::Seconds(absl::GetFlag(FLAGS_startup_timeout_s));
  ASSIGN_OR_RETURN(HostPort own, ParseHostPort(*setup.tf.TaskAddress()));
  setup.listen = HostPort{setup.bind_host, own.port}.ToString();
  return setup;
}

// The worker's Prometheus metrics: one registry per process (worker 0
// running the chief's duties serves both sets), served on --metrics_port.
struct ServedMetrics {
  MetricsRegistry registry;
  std::unique_ptr<WorkerMetrics> worker;
  JobNameLabel job_name;                          // known once the job spec is
  std::unique_ptr<TaskMetricsEndpoint> endpoint;  // null: not served
};

absl::Status ServeMetrics(const WorkerSetup& setup, ServedMetrics& metrics) {
  ASSIGN_OR_RETURN(metrics.worker, WorkerMetrics::Create(&metrics.registry));
  TaskMetricsEndpointOptions endpoint;
  endpoint.host = setup.bind_host;
  endpoint.port = absl::GetFlag(FLAGS_metrics_port);
  endpoint.task_type = "worker";
  endpoint.task_index = setup.tf.task.index;
  endpoint.job_name = [&metrics] { return metrics.job_name.Get(); };
  ASSIGN_OR_RETURN(metrics.endpoint,
                   ServeTaskMetrics(&metrics.registry, endpoint));
  return absl::OkStatus();
}

// Worker 0 without a chief job runs the chief's duties on a thread (on its
// own port); other workers serve health checks.
class ChiefDutiesOrHealth {
 public:
  absl::Status Start(const WorkerSetup& setup, MetricsRegistry* registry) {
    if (!setup.tf.IsChief()) {
      ASSIGN_OR_RETURN(health_,
                       StartHealthServer(setup.listen, setup.security));
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(
        ChiefOptions options,
        ChiefDutiesOptions(setup.tf, setup.security, setup.bind_host,
                           setup.startup, registry));
    LOG(INFO) << "no \"chief\" job in TF_CONFIG: this worker also runs the "
                 "chief's duties";
    chief_ = std::thread([this, options = std::move(options)] {
      result_ = RunChief(options);
      done_.Notify();
    });
    return absl::OkStatus();
  }

  bool runs_chief() const { return chief_.joinable(); }
  const Notification& chief_done() const { return done_; }

  // Waits for the chief's duties (if any) to end; the process's exit code
  // given the worker's own `result`.
  int Finish(const absl::Status& result) {
    if (chief_.joinable()) {
      chief_.join();
      if (!result_.ok()) {
        if (ChiefTermination* t = termination.load();
            t != nullptr && t->requested().has_value()) {
          LOG(WARNING) << "job " << result_.message();
          return t->ExitCode(1);
        }
        LOG(ERROR) << "job failed: " << result_.message();
        return 1;
      }
      LOG(INFO) << "job succeeded";
    }
    if (health_ != nullptr) health_->Drain(absl::ZeroDuration());
    return result.ok() ? 0 : 1;
  }

 private:
  std::thread chief_;
  absl::Status result_;
  Notification done_;  // the in-process chief has returned
  std::unique_ptr<ServerRunner> health_;
};

// Tells the chief why this worker stops (best effort: it may be gone).
void ReportFailure(GrpcCoordinatorClient& coordinator, int worker,
                   uint64_t incarnation, const absl::Status& result) {
  LOG(ERROR) << result.message();
  ProgressReport report;
  report.set_worker_index(worker);
  report.set_incarnation(incarnation);
  report.set_error(std::string(result.message()));
  (void)coordinator.ReportProgress(report, absl::Seconds(5));
}

int Run() {
  absl::StatusOr<WorkerSetup> setup = LoadWorkerSetup();
  if (!setup.ok()) {
    LOG(ERROR) << setup.status().message();
    return 1;
  }
  const TfConfig& tf = setup->tf;
  ServedMetrics metrics;
  ChiefDutiesOrHealth duties;
  if (absl::Status served = ServeMetrics(*setup, metrics); !served.ok()) {
    LOG(ERROR) << served.message();
    return 1;
  }
  if (absl::Status started = duties.Start(*setup, &metrics.registry);
      !started.ok()) {
    LOG(ERROR) << started.message();
    return 1;
  }
  const bool served = metrics.endpoint != nullptr;

  const TaskId chief_task = tf.ChiefTask();
  absl::StatusOr<std::string> chief_found = tf.ChiefAddress();
  if (!chief_found.ok()) {  // ParseTfConfig refuses this; kept as a guard
    LOG(ERROR) << chief_found.status().message();
    return 1;
  }
  const std::string chief_address = *std::move(chief_found);
  GrpcCoordinatorClient coordinator(
      chief_address, absl::StrCat(chief_task.ToString(), " at ", chief_address),
      setup->security, tf.task, chief_task.ToString());
  std::mt19937_64 random(std::random_device{}());
  const uint64_t incarnation = random();
  absl::Status result;
  absl::StatusOr<std::unique_ptr<Device>> device =
      SelectDevice(absl::GetFlag(FLAGS_device), /*cpu_threads=*/1);
  absl::StatusOr<std::optional<JobSpec>> spec =
      device.ok()
          ? JoinTheJob(coordinator, tf.task, incarnation, setup->startup,
                       duties.runs_chief(), duties.chief_done())
          : absl::StatusOr<std::optional<JobSpec>>(device.status());
  if (!spec.ok()) {
    result = spec.status();
  } else if (spec->has_value()) {
    metrics.job_name.Set((*spec)->config().name());
    result = Train(*setup, **spec, std::move(*device), coordinator, incarnation,
                   served ? metrics.worker.get() : nullptr,
                   served ? &metrics.registry : nullptr);
  }
  if (!result.ok()) {
    ReportFailure(coordinator, tf.task.index, incarnation, result);
  }
  return duties.Finish(result);
}

}  // namespace
}  // namespace psflow

int main(int argc, char** argv) {
  // Before anything else: it may start this binary again.
  psflow::UseFastBlasKernels(argv);
  psflow::StartRoleProcess(
      argc, argv,
      "worker: a psflow training worker (TF_CONFIG task worker i).\n  worker "
      "--tls_dir=<dir> --token_dir=<dir> [--tf_config=<file or JSON>] "
      "[--device=auto|cpu|cuda]",
      [](const std::string& signal) {
        // Worker 0 running the chief's duties saves first; any other worker
        // has nothing to save (an unapplied gradient is no lost step).
        if (psflow::ChiefTermination* t = psflow::termination.load()) {
          t->OnSignal(signal);
          return;
        }
        LOG(ERROR) << "received " << signal << "; exiting";
        std::_Exit(128 + psflow::TerminationSignalNumber(signal));
      });
  return psflow::Run();
}
