#include "chief/chief_runner.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpoint_manager.h"
#include "checkpoint/directory_lock.h"
#include "chief/chief.h"
#include "chief/chief_metrics.h"
#include "chief/coordinator_service.h"
#include "chief/job_coordinator.h"
#include "client/cluster_client.h"
#include "client/health_check.h"
#include "common/file_util.h"
#include "common/host_cores.h"
#include "common/host_memory.h"
#include "common/host_port.h"
#include "common/job/job_config.h"
#include "common/job/placement_proto.h"
#include "common/logging.h"
#include "common/metrics/event_file_writer.h"
#include "common/metrics/system_metrics_logger.h"
#include "common/mutex.h"
#include "common/port_file.h"
#include "common/status_macros.h"
#include "data/criteo.h"
#include "data/dataset.h"
#include "data/training_data.h"
#include "evaluation/test_data.h"
#include "model/job_plan.h"
#include "model/memory_estimate.h"
#include "proto/protocol.h"

namespace psflow {
namespace {

// Waits for every parameter server, each named with its address.
absl::Status WaitForParameterServers(const TfConfig& config,
                                     const TransportSecurity& security,
                                     absl::Time deadline, ServerBoard& board) {
  std::vector<std::string> missing;
  std::vector<std::thread> probes;
  std::vector<absl::Status> results(config.cluster.NumTasks(TaskType::kPs));
  int i = 0;
  for (const auto& [index, address] : config.cluster.job(TaskType::kPs)) {
    probes.emplace_back([&, slot = i++, index = index, address = address] {
      results[slot] =
          WaitUntilHealthy(address, absl::StrCat("ps-", index, " at ", address),
                           deadline, security);
      board.RecordProbe(index, results[slot], RealClock().Now());
    });
  }
  for (auto& p : probes) p.join();
  for (const absl::Status& s : results) {
    if (!s.ok()) missing.push_back(std::string(s.message()));
  }
  if (missing.empty()) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat("parameter servers missing at the deadline: ",
                   absl::StrJoin(missing, "; ")));
}

JobCoordinator::Options CoordinatorOptions(const ChiefOptions& options) {
  const TfConfig& tf = options.tf_config;
  JobCoordinator::Options coordinator;
  coordinator.num_workers = tf.cluster.NumTasks(TaskType::kWorker);
  for (const auto& [index, address] : tf.cluster.job(TaskType::kWorker)) {
    coordinator.worker_addresses[index] = address;
  }
  coordinator.heartbeat_timeout = options.heartbeat_timeout;
  coordinator.worker_replacement_timeout = options.worker_replacement_timeout;
  coordinator.chief_task = tf.ChiefTask().ToString();
  // The chief's own TF_CONFIG always names it (ParseTfConfig refuses one
  // without a chief).
  coordinator.chief_address = tf.ChiefAddress().value_or(std::string());
  for (const auto& [index, address] : tf.cluster.job(TaskType::kPs)) {
    coordinator.ps_addresses[index] = address;
  }
  if (tf.cluster.HasJob(TaskType::kEvaluator)) {
    const auto& evaluators = tf.cluster.job(TaskType::kEvaluator);
    if (!evaluators.empty()) {
      coordinator.evaluator_address = evaluators.begin()->second;
    }
  }
  coordinator.job_name = options.job.name();
  coordinator.mode = options.job.training().mode();
  return coordinator;
}

// What a checkpoint records of the model: the job's model config and the
// input the chief read from the data, so that `psctl ckpt export
// --format=onnx` can define the model again without the job's config.
CheckpointModel CheckpointModelOf(const JobSpec& spec) {
  CheckpointModel model;
  *model.mutable_config() = spec.config().model();
  model.set_data_format(spec.config().data().format());
  for (int64_t d : spec.example_shape()) model.add_example_shape(d);
  model.set_num_classes(spec.num_classes());
  model.set_num_fields(spec.num_fields());
  return model;
}

// The job's checkpoint settings, with the directory made absolute (the
// parameter servers write into it too) and the flag override applied;
// with `spec`, the model it records.
CheckpointManagerOptions CheckpointOptions(const ChiefOptions& options,
                                           const JobSpec* spec = nullptr) {
  const CheckpointConfig& c = options.job.checkpoint();
  CheckpointManagerOptions m;
  m.directory = AbsolutePath(
      options.checkpoint_dir.empty() ? c.directory() : options.checkpoint_dir);
  m.retention.max_to_keep = c.max_to_keep();
  m.retention.keep_checkpoint_every_n_hours = c.keep_checkpoint_every_n_hours();
  m.job_name = options.job.name();
  m.optimizer = options.job.optimizer();
  m.mode = options.job.training().mode();
  if (spec != nullptr) m.model = CheckpointModelOf(*spec);
  return m;
}

bool CheckpointsConfigured(const ChiefOptions& options) {
  return !options.checkpoint_dir.empty() ||
         !options.job.checkpoint().directory().empty();
}

// The compute threads of the chief's own final evaluation.
int EvaluationThreads() { return UsableCores(); }

// The spec every task receives: the job, its variables' placement, how the
// servers update them, and the data's shape.
JobSpec SpecFor(const ChiefOptions& options, const TrainingData& train,
                const JobPlan& plan) {
  const JobConfig& job = options.job;
  const int num_workers = options.tf_config.cluster.NumTasks(TaskType::kWorker);
  JobSpec spec;
  *spec.mutable_config() = job;
  PlacementToProto(plan.placement, spec);
  ConfigureRequest& ps = *spec.mutable_ps_config();
  ps.set_protocol_version(kProtocolVersion);
  *ps.mutable_optimizer() = job.optimizer();
  *ps.mutable_learning_rate() = job.learning_rate();
  ps.set_mode(job.training().mode());
  ps.set_num_workers(num_workers);
  ps.set_replicas_to_aggregate(ReplicasToAggregate(job, num_workers));
  ps.set_staleness_aware_learning_rate(
      job.training().staleness_aware_learning_rate());
  ps.set_max_staleness(job.training().max_staleness());
  ps.set_job_name(job.name());
  ps.set_log_dir(job.logging().log_dir());
  ps.set_run_group(job.logging().run_group());
  spec.set_total_steps(TotalGlobalSteps(job, train.num_examples, num_workers));
  spec.set_num_train_examples(train.num_examples);
  spec.set_num_workers(num_workers);
  spec.set_input_size(plan.model->input().num_features());
  spec.set_num_classes(train.num_classes);
  for (int64_t d : train.example_shape) spec.add_example_shape(d);
  spec.set_num_fields(train.num_fields);
  for (const EmbeddingTableSpec& table : plan.tables)
    *spec.add_tables() = table;
  for (const auto& [index, address] :
       options.tf_config.cluster.job(TaskType::kPs)) {
    spec.add_ps_addresses(address);
  }
  for (const auto& [index, address] :
       options.tf_config.cluster.job(TaskType::kWorker)) {
    spec.add_worker_addresses(address);
  }
  return spec;
}

ChiefPolicy PolicyFor(const ChiefOptions& options) {
  ChiefPolicy policy;
  policy.startup_timeout = options.startup_timeout;
  policy.ps_return_timeout = options.ps_return_timeout;
  policy.final_evaluation_timeout = options.final_evaluation_timeout;
  policy.log_interval = options.log_interval;
  policy.has_evaluator = options.tf_config.cluster.HasJob(TaskType::kEvaluator);
  // The cores this process may use (its container's CPU limit, not the
  // node's count); the plan checks the evaluation's memory for as many.
  policy.evaluation_threads = EvaluationThreads();
  policy.result_file = options.result_file;
  return policy;
}

// A Chief that can only end the job (its model unplanned): it stops every
// parameter server of the TF_CONFIG.
class EndingChief {
 public:
  EndingChief(const ChiefOptions& options, JobCoordinator& coordinator) {
    ParameterClient::Options shutdown_options;
    shutdown_options.rpc_timeout = absl::Seconds(5);
    client_ = ConnectToParameterServers(options.tf_config, Placement(),
                                        shutdown_options, options.security);
    ChiefParts parts;
    parts.coordinator = &coordinator;
    parts.client = client_.get();
    chief_ = std::make_unique<Chief>(std::move(parts), PolicyFor(options),
                                     JobSpec(), nullptr);
  }
  Chief& chief() { return *chief_; }

 private:
  std::unique_ptr<ParameterClient> client_;
  std::unique_ptr<Chief> chief_;
};

// A signal outside training (termination.h) ends the job from the stop's
// own thread, whatever the chief's thread is doing: through the Chief
// once it is built (Chief::StopOnSignal), before that as a job that
// failed before it was planned; then the checkpoint directory is released
// (a crash would leave it to the next chief to take over). The chief's
// thread hands over what the stop needs as it gets it. Installed for
// RunChief's whole run.
class SignalStop {
 public:
  SignalStop(const ChiefOptions& options, JobCoordinator& coordinator)
      : options_(options), coordinator_(coordinator) {
    if (options_.termination != nullptr) {
      options_.termination->SetStopHandler(
          [this](const std::string& signal) { Stop(signal); });
    }
  }
  // Waits for a stop under way (the process then exits); releases the
  // checkpoint directory.
  ~SignalStop() {
    if (options_.termination != nullptr) {
      options_.termination->ClearStopHandler();
    }
  }

  // The checkpoint directory's lock, released when the job ends (at once
  // when a stop ended it already).
  void HoldLock(std::unique_ptr<DirectoryLock> lock) {
    MutexLock hold(&mu_);
    if (!ended_) lock_ = std::move(lock);
  }
  // The chief that runs the job from now on; false when a stop ended the
  // job already (the chief must not run it).
  bool SetChief(Chief* chief) {
    MutexLock hold(&mu_);
    if (ended_) return false;
    chief_ = chief;
    return true;
  }
  // The chief returned: the job ended.
  void ChiefReturned() {
    MutexLock hold(&mu_);
    chief_ = nullptr;
    ended_ = true;
  }
  // Ends a job that failed before it was planned (its servers still stop),
  // unless a stop ended it.
  absl::Status FailBeforePlanned(absl::Status cause) {
    MutexLock hold(&mu_);
    if (ended_) return cause;
    ended_ = true;
    return EndingChief(options_, coordinator_).chief().Finish(std::move(cause));
  }

 private:
  void Stop(const std::string& signal) {
    MutexLock hold(&mu_);
    if (!ended_) {
      ended_ = true;
      if (chief_ != nullptr) {
        chief_->StopOnSignal(signal);
      } else {
        EndingChief(options_, coordinator_).chief().StopOnSignal(signal);
      }
    }
    if (lock_ != nullptr) {
      lock_.reset();
      LOG(INFO) << "released the checkpoint directory";
    }
  }

  const ChiefOptions& options_;
  JobCoordinator& coordinator_;
  Mutex mu_;
  Chief* chief_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<DirectoryLock> lock_ ABSL_GUARDED_BY(mu_);
};

// What the chief needs before it acts on the servers: the job planned
// from its training data, the test data checked, the checkpoint directory
// held (by `stop`, for the job's life).
struct PlannedJob {
  JobPlan plan;
  JobSpec spec;
  bool checkpoints = false;  // the directory is locked
};

absl::StatusOr<PlannedJob> PlanTheJob(const ChiefOptions& options,
                                      JobCoordinator& coordinator,
                                      SignalStop& stop) {
  const TfConfig& tf = options.tf_config;
  const JobConfig& job = options.job;
  ASSIGN_OR_RETURN(const TrainingData train, DescribeTrainingData(job));
  JobPlanOptions plan_options;
  plan_options.num_ps = tf.cluster.NumTasks(TaskType::kPs);
  plan_options.num_workers = tf.cluster.NumTasks(TaskType::kWorker);
  plan_options.host = AvailableMemory();
  plan_options.has_test_data = HasTestData(job);
  plan_options.evaluation_threads = EvaluationThreads();
  // The test set's size, before anything holds it (it is read whole
  // below, by the evaluator and by the final evaluation): the IDX
  // header's count, or the CRITEO lines counted one at a time. The plan
  // checks that it and the evaluation's batch fit; the data itself is
  // checked below.
  if (plan_options.has_test_data && job.data().format() != DataConfig::CRITEO) {
    if (absl::StatusOr<DatasetInfo> test = DescribeIdxDataset(
            job.data().test_images(), job.data().test_labels());
        test.ok()) {
      plan_options.test_examples = test->num_examples;
    }
  } else if (plan_options.has_test_data) {
    coordinator.SetActivity("counting the test data");
    if (absl::StatusOr<CtrExamples> test = DescribeCriteoFile(
            job.data().test_path(), CriteoFormatOf(job.data()));
        test.ok()) {
      plan_options.test_examples = test->num_examples;
    }
  }
  PlannedJob planned;
  ASSIGN_OR_RETURN(planned.plan, PlanJob(job, train, plan_options));
  LOG(INFO) << "model: " << planned.plan.model->Describe();
  LOG(INFO) << "memory: " << DescribeMemoryEstimate(planned.plan.memory);
  planned.spec = SpecFor(options, train, planned.plan);
  planned.spec.set_num_test_examples(plan_options.test_examples);
  if (CheckpointsConfigured(options)) {
    const std::string directory = CheckpointOptions(options).directory;
    ASSIGN_OR_RETURN(
        std::unique_ptr<DirectoryLock> lock,
        DirectoryLock::Acquire(directory, absl::StrCat("job ", job.name(), ", ",
                                                       tf.task.ToString())));
    if (!lock->previous_holder().empty()) {
      LOG(WARNING) << "took over the checkpoint directory from "
                   << lock->previous_holder()
                   << ", which ended without releasing it (a crash)";
    }
    stop.HoldLock(std::move(lock));
    planned.checkpoints = true;
    // Every task learns the resolved directory (the evaluator reads it).
    planned.spec.mutable_config()->mutable_checkpoint()->set_directory(
        directory);
  }
  // The evaluator's own read of the test data, now: data that cannot serve
  // the model (another split's labels, images of another shape, a
  // truncated file) fails the job before it trains, not at the first
  // evaluation.
  if (HasTestData(job)) {
    coordinator.SetActivity("checking the test data");
    if (absl::StatusOr<TestData> test = LoadTestData(planned.spec);
        !test.ok()) {
      return absl::Status(test.status().code(),
                          absl::StrCat("the test data cannot serve this job: ",
                                       test.status().message()));
    }
  }
  return planned;
}

// The chief's event file; null (logged) when it cannot be written.
std::unique_ptr<EventFileWriter> OpenChiefMetrics(const ChiefOptions& options) {
  // "chief-0" even when worker 0 runs the chief's duties: its own
  // training metrics stay apart under "worker-0".
  absl::StatusOr<std::unique_ptr<EventFileWriter>> writer =
      EventFileWriter::Create(
          MetricsDir(options.job, options.logdir, "chief-0"));
  if (!writer.ok()) {
    LOG(WARNING) << "no metrics: " << writer.status().message();
    return nullptr;
  }
  LOG(INFO) << "metrics: " << (*writer)->path();
  return *std::move(writer);
}

// The result file is written once the job ends: a path it cannot be
// written to is refused now, not after the whole run.
absl::Status CheckResultFile(const std::string& path) {
  RETURN_IF_ERROR(CheckReplaceableFile(path));
  const std::string dir = DirName(AbsolutePath(path));
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
      access(dir.c_str(), W_OK | X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--result_file=", path, ": its directory ", dir,
        " does not exist or is not writable (", std::strerror(errno),
        "); create it, or name another --result_file"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunChief(const ChiefOptions& chief_options) {
  if (!chief_options.result_file.empty()) {
    RETURN_IF_ERROR(CheckResultFile(chief_options.result_file));
  }
  // Every call this chief makes carries its incarnation: the servers follow
  // one chief of the job at a time (ps/chief_fence.h).
  ChiefOptions options = chief_options;
  options.security.chief_incarnation = NewChiefIncarnation();
  const TfConfig& tf = options.tf_config;
  JobCoordinator coordinator(CoordinatorOptions(options));
  // From here on a signal outside training ends the job properly.
  SignalStop stop(options, coordinator);
  std::unique_ptr<MetricsRegistry::RefresherHandle> chief_metrics;
  std::unique_ptr<CheckpointMetrics> checkpoint_metrics;
  if (options.metrics_registry != nullptr) {
    ASSIGN_OR_RETURN(chief_metrics, ExportChiefMetrics(options.metrics_registry,
                                                       &coordinator));
    ASSIGN_OR_RETURN(checkpoint_metrics,
                     CheckpointMetrics::Create(options.metrics_registry));
  }

  ASSIGN_OR_RETURN(const std::string chief_address, tf.ChiefAddress());
  ASSIGN_OR_RETURN(HostPort own, ParseHostPort(chief_address));
  ASSIGN_OR_RETURN(
      auto server,
      CoordinatorServer::Start(HostPort{options.bind_host, own.port}.ToString(),
                               options.security, &coordinator));
  std::optional<PortFile> port_file;  // removed when the chief returns
  if (!options.port_file.empty()) {
    ASSIGN_OR_RETURN(PortFile written,
                     PortFile::Write(options.port_file, server->port()));
    port_file.emplace(std::move(written));
  }
  LOG(INFO) << "coordinating " << JobConfigSummary(options.job)
            << "; serving on port " << server->port() << "; chief incarnation "
            << options.security.chief_incarnation;

  absl::StatusOr<PlannedJob> planned = PlanTheJob(options, coordinator, stop);
  if (!planned.ok()) {
    absl::Status failed = stop.FailBeforePlanned(planned.status());
    server->Stop(absl::Seconds(1));
    return failed;
  }
  ParameterClient::Options client_options;
  client_options.rpc_timeout = absl::Seconds(60);
  std::unique_ptr<ParameterClient> client = ConnectToParameterServers(
      tf, planned->plan.placement, client_options, options.security);
  std::unique_ptr<CheckpointManager> checkpoints;
  if (planned->checkpoints) {
    absl::StatusOr<std::unique_ptr<CheckpointManager>> created =
        CheckpointManager::Create(CheckpointOptions(options, &planned->spec),
                                  client.get());
    if (!created.ok()) {
      absl::Status failed = stop.FailBeforePlanned(created.status());
      server->Stop(absl::Seconds(1));
      return failed;
    }
    checkpoints = *std::move(created);
  }
  std::unique_ptr<EventFileWriter> metrics = OpenChiefMetrics(options);
  std::unique_ptr<SystemMetricsLogger> system_metrics;
  if (options.system_metrics && metrics != nullptr) {
    system_metrics = SystemMetricsLogger::StartOrWarn(
        DirName(metrics->path()), SystemMetricsLogger::Options());
  }

  ChiefParts parts;
  parts.coordinator = &coordinator;
  parts.client = client.get();
  parts.checkpoints = checkpoints.get();
  parts.await_servers = [&options, &coordinator](absl::Time deadline) {
    return WaitForParameterServers(options.tf_config, options.security,
                                   deadline, coordinator.servers());
  };
  parts.metrics = metrics.get();
  parts.checkpoint_metrics = checkpoint_metrics.get();
  parts.termination = options.termination;
  Chief chief(std::move(parts), PolicyFor(options), planned->spec,
              planned->plan.model.get());
  absl::Status result =
      stop.SetChief(&chief)
          ? chief.Run()
          : absl::CancelledError("stopped by a signal before training");
  stop.ChiefReturned();
  server->Stop(absl::Seconds(1));
  return result;
}

}  // namespace psflow
