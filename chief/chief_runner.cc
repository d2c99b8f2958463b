#include "chief/chief_runner.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpoint_manager.h"
#include "checkpoint/directory_lock.h"
#include "checkpoint/state_file.h"
#include "chief/chief_metrics.h"
#include "chief/coordinator_service.h"
#include "chief/final_evaluation.h"
#include "chief/job_coordinator.h"
#include "chief/recovery.h"
#include "chief/server_watch.h"
#include "chief/training_supervisor.h"
#include "client/cluster_client.h"
#include "client/health_check.h"
#include "common/fault_point.h"
#include "common/file_util.h"
#include "common/host_memory.h"
#include "common/host_port.h"
#include "common/job/job_config.h"
#include "common/job/placement_proto.h"
#include "common/json.h"
#include "common/logging.h"
#include "common/metrics/event_file_writer.h"
#include "common/metrics/system_metrics_logger.h"
#include "common/port_file.h"
#include "common/status_macros.h"
#include "evaluation/test_data.h"
#include "model/initializer.h"
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
      board.RecordProbe(index, results[slot], absl::Now());
    });
  }
  for (auto& p : probes) p.join();
  for (const absl::Status& s : results) {
    if (!s.ok()) missing.push_back(std::string(s.message()));
  }
  if (missing.empty()) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat("parameter servers missing at the startup deadline: ",
                   absl::StrJoin(missing, "; ")));
}

// What the parameter servers hold when this chief starts. A chief that
// restarted finds them as its predecessor left them: trained (updates
// applied), untouched (a fresh or restarted server), or with a restore
// cut short (its PREPARE never committed: the servers may hold models of
// different steps).
struct ServerStates {
  std::vector<std::string> trained, untouched, restore_pending;
  // Every server holds the job's trained state and none is mid-restore:
  // a consistent model, newer than any checkpoint.
  bool LiveModelUsable() const {
    return !trained.empty() && untouched.empty() && restore_pending.empty();
  }
};

absl::StatusOr<ServerStates> ServerStatesOf(ParameterClient& client) {
  const std::vector<int64_t> expected =
      ExpectedVariablesPerServer(client.placement());
  const std::vector<absl::StatusOr<StatsResponse>> stats =
      client.StatsOfEach(absl::Seconds(30));
  ServerStates states;
  for (size_t i = 0; i < stats.size(); ++i) {
    if (!stats[i].ok()) return stats[i].status();
    if (i < expected.size() && expected[i] == 0) continue;  // holds nothing
    const std::string name = absl::StrCat("ps-", i);
    if (stats[i]->restore_pending()) states.restore_pending.push_back(name);
    (stats[i]->updates_applied() > 0 ? states.trained : states.untouched)
        .push_back(name);
  }
  return states;
}

// Configures every server. A server that still follows an earlier chief
// of this job (one that crashed a moment ago, and this chief is its
// restart) refuses with ABORTED until that one has been silent for the
// servers' --chief_takeover_s: waited out, up to `deadline`. A chief still
// alive keeps its servers, and this one fails naming it.
absl::Status ConfigureAsTheJobsChief(ParameterClient& client,
                                     const ConfigureRequest& request,
                                     absl::Time deadline,
                                     JobCoordinator& coordinator) {
  absl::Status configured = client.Configure(request);
  if (absl::IsAborted(configured)) {
    LOG(WARNING) << "a parameter server follows another chief of this job; "
                    "waiting for it to let go (a crashed chief's claim "
                    "lapses): "
                 << configured.message();
    coordinator.SetActivity(
        "waiting for the parameter servers to follow this chief");
  }
  while (absl::IsAborted(configured) && absl::Now() < deadline) {
    absl::SleepFor(absl::Seconds(1));
    configured = client.Configure(request);
  }
  return configured;
}

struct Prepared {
  // Held for the job's life: no second job writes the same checkpoints.
  std::unique_ptr<DirectoryLock> checkpoint_lock;
  JobSpec spec;
  std::unique_ptr<ParameterClient> client;
  std::unique_ptr<CheckpointManager> checkpoints;  // null: none configured
  // The step the job starts from when a checkpoint of it exists (restored,
  // or the initial one); -1 otherwise.
  int64_t restored_step = -1;
  // Asks the servers for their Stats every second from the end of
  // PrepareJob until the job ends (RunChief starts it).
  std::unique_ptr<ServerWatch> watch;
};

// The job's checkpoint settings, with the directory made absolute (the
// parameter servers write into it too) and the flag override applied.
CheckpointManagerOptions CheckpointOptions(const ChiefOptions& options) {
  const CheckpointConfig& c = options.job.checkpoint();
  CheckpointManagerOptions m;
  m.directory = AbsolutePath(
      options.checkpoint_dir.empty() ? c.directory() : options.checkpoint_dir);
  m.retention.max_to_keep = c.max_to_keep();
  m.retention.keep_checkpoint_every_n_hours = c.keep_checkpoint_every_n_hours();
  m.job_name = options.job.name();
  m.optimizer = options.job.optimizer();
  m.mode = options.job.training().mode();
  return m;
}

bool CheckpointsConfigured(const ChiefOptions& options) {
  return !options.checkpoint_dir.empty() ||
         !options.job.checkpoint().directory().empty();
}

// A fresh job: the model's initial values on every server, then the
// initial checkpoint (a consistent state to recover from before the first
// scheduled save). Nothing has trained yet (workers join only once the
// chief is prepared), so a parameter server lost meanwhile costs nothing:
// wait for it, create the variables again and start over.
absl::Status InitializeModel(const ChiefOptions& options,
                             const ModelDefinition& model,
                             const std::vector<EmbeddingTableSpec>& tables,
                             const Placement& placement,
                             JobCoordinator& coordinator, Prepared& prepared) {
  const TfConfig& tf = options.tf_config;
  const JobConfig& job = options.job;
  const int num_workers = prepared.spec.num_workers();
  const ConfigureRequest& ps = prepared.spec.ps_config();
  coordinator.SetActivity("initializing the variables");
  const std::vector<ModelVariable>& variables = model.variables();
  std::vector<std::vector<float>> initial =
      InitialValues(variables, job.training().seed());
  std::vector<ParameterClient::Const> values;
  for (size_t v = 0; v < variables.size(); ++v) {
    values.emplace_back(variables[v].name(), initial[v]);
  }
  constexpr int kAttempts = 3;
  for (int attempt = 1;; ++attempt) {
    absl::Status initialized = prepared.client->Assign(values)->Wait();
    if (initialized.ok()) {
      LOG(INFO) << "initialized " << variables.size() << " variables ("
                << absl::StrJoin(placement.bytes_per_ps, ", ")
                << " bytes per ps); " << prepared.spec.total_steps()
                << " global steps over " << num_workers << " workers";
    }
    if (initialized.ok() && prepared.checkpoints != nullptr) {
      // A consistent state to recover from before the first scheduled
      // save: a parameter server lost early is restored from it, not the
      // job lost.
      coordinator.SetActivity("saving the initial checkpoint");
      absl::StatusOr<SavedCheckpoint> saved = prepared.checkpoints->Save();
      if (saved.ok()) {
        LogSavedCheckpoint(*saved);
        prepared.restored_step = saved->step;
      } else {
        initialized = absl::Status(
            saved.status().code(),
            absl::StrCat("the initial checkpoint (step 0) failed: ",
                         saved.status().message()));
      }
    }
    if (initialized.ok()) return absl::OkStatus();
    if (attempt == kAttempts) return initialized;
    LOG(WARNING) << "initializing the variables failed ("
                 << initialized.message()
                 << "); waiting for every parameter server and starting over";
    coordinator.SetActivity("initializing again after a lost parameter server");
    RETURN_IF_ERROR(WaitForParameterServers(
        tf, options.security, absl::Now() + options.ps_return_timeout,
        coordinator.servers()));
    RETURN_IF_ERROR(ConfigureAsTheJobsChief(
        *prepared.client, ps, absl::Now() + options.ps_return_timeout,
        coordinator));
    RETURN_IF_ERROR(prepared.client->CreateVariables());
    RETURN_IF_ERROR(prepared.client->CreateTables(tables));
  }
}

// A restarted chief finds the job's model where its predecessor left it:
// on the servers (consistent: resumed from them, nothing thrown away) or in
// the newest checkpoint (restored). True when resumed either way; false
// for a fresh job (nothing trained, no checkpoint); FailedPrecondition
// when some servers hold trained state, others lost theirs, and no
// checkpoint can make them consistent.
absl::StatusOr<bool> ResumeExistingModel(const ChiefOptions& options,
                                         JobCoordinator& coordinator,
                                         Prepared& prepared) {
  const JobConfig& job = options.job;
  ASSIGN_OR_RETURN(ServerStates servers, ServerStatesOf(*prepared.client));
  if (servers.LiveModelUsable()) {
    // This chief restarted while the servers (and the workers) went on:
    // their model is consistent and newer than any checkpoint, so resuming
    // from it throws no work away. A sync checkpoint's hold that the old
    // chief left is this one's to lift.
    if (job.training().mode() == SYNC) {
      HoldRequest release;
      release.set_protocol_version(kProtocolVersion);
      release.set_action(HoldRequest::RELEASE);
      absl::Status released = prepared.client->HoldAll(release).status();
      if (!released.ok()) {
        LOG(WARNING) << "cannot lift a checkpoint hold the previous chief "
                        "may have left: "
                     << released.message();
      }
    }
    LOG(INFO) << "every parameter server holds this job's trained variables "
                 "(none restarted, no restore cut short); resuming from them, "
                 "which is newer than any checkpoint";
    return true;
  }
  if (prepared.checkpoints != nullptr) {
    ASSIGN_OR_RETURN(std::optional<std::string> latest,
                     LatestCheckpoint(prepared.checkpoints->directory()));
    if (latest.has_value()) {
      if (!servers.trained.empty()) {
        LOG(WARNING) << "the parameter servers' own state cannot be resumed ("
                     << (servers.untouched.empty()
                             ? ""
                             : absl::StrCat(
                                   absl::StrJoin(servers.untouched, ", "),
                                   " restarted and lost theirs; "))
                     << (servers.restore_pending.empty()
                             ? ""
                             : absl::StrCat("a restore was cut short on ",
                                            absl::StrJoin(
                                                servers.restore_pending, ", ")))
                     << "); restoring the newest checkpoint";
      }
      coordinator.SetActivity(absl::StrCat("restoring ", *latest));
      const absl::Time start = absl::Now();
      absl::StatusOr<int64_t> step = RestoreCheckpoint(
          *latest, job.optimizer(), *prepared.client, absl::Minutes(10));
      if (!step.ok()) {
        return absl::Status(
            step.status().code(),
            absl::StrCat("cannot resume from ", *latest, ": ",
                         step.status().message(),
                         " (`psctl ckpt verify` checks it; point "
                         "checkpoint.directory elsewhere to start afresh)"));
      }
      prepared.restored_step = *step;
      // A restarted chief: the workers that kept training meanwhile say how
      // far the job had come (the work the restore throws away).
      int64_t reached = 0;
      for (const ProgressReport& report : coordinator.LastReports()) {
        reached = std::max(reached, report.global_step());
      }
      LOG(INFO) << "restored " << *latest << " in "
                << absl::FormatDuration(
                       absl::Trunc(absl::Now() - start, absl::Milliseconds(1)))
                << "; resuming at global step " << *step << " of "
                << prepared.spec.total_steps()
                << TrainAgainNote(reached, *step, prepared.spec.total_steps());
      return true;
    }
  }
  if (!servers.trained.empty()) {
    // Some servers hold trained variables, but not a consistent model,
    // and there is no checkpoint to assemble one from.
    std::vector<std::string> lost = servers.untouched;
    lost.insert(lost.end(), servers.restore_pending.begin(),
                servers.restore_pending.end());
    return absl::FailedPreconditionError(absl::StrCat(
        absl::StrJoin(servers.trained, ", "), " hold trained variables but ",
        absl::StrJoin(lost, ", "),
        " lost theirs (restarted, or a restore was cut short), and there is "
        "no checkpoint to restore: the job cannot resume consistently. "
        "Restart every parameter server to train afresh, or configure "
        "checkpoint.directory so a lost server can be recovered"));
  }
  return false;
}

absl::StatusOr<Prepared> PrepareJob(const ChiefOptions& options,
                                    absl::Time deadline,
                                    JobCoordinator& coordinator) {
  const TfConfig& tf = options.tf_config;
  const JobConfig& job = options.job;
  ASSIGN_OR_RETURN(const TrainingData train, DescribeTrainingData(job));
  const int num_fields = train.num_fields;
  const int num_workers = tf.cluster.NumTasks(TaskType::kWorker);
  JobPlanOptions plan_options;
  plan_options.num_ps = tf.cluster.NumTasks(TaskType::kPs);
  plan_options.num_workers = num_workers;
  plan_options.host = AvailableMemory();
  ASSIGN_OR_RETURN(JobPlan plan, PlanJob(job, train, plan_options));
  const std::unique_ptr<ModelDefinition> model = std::move(plan.model);
  LOG(INFO) << "model: " << model->Describe();
  LOG(INFO) << "memory: " << DescribeMemoryEstimate(plan.memory);
  const Placement& placement = plan.placement;
  const std::vector<EmbeddingTableSpec>& tables = plan.tables;

  Prepared prepared;
  if (CheckpointsConfigured(options)) {
    ASSIGN_OR_RETURN(
        prepared.checkpoint_lock,
        DirectoryLock::Acquire(
            CheckpointOptions(options).directory,
            absl::StrCat("job ", job.name(), ", ", tf.task.ToString())));
    if (!prepared.checkpoint_lock->previous_holder().empty()) {
      LOG(WARNING) << "took over the checkpoint directory from "
                   << prepared.checkpoint_lock->previous_holder()
                   << ", which ended without releasing it (a crash)";
    }
  }
  JobSpec& spec = prepared.spec;
  *spec.mutable_config() = job;
  PlacementToProto(placement, spec);
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
  spec.set_num_workers(num_workers);
  spec.set_input_size(model->input().num_features());
  spec.set_num_classes(train.num_classes);
  for (int64_t d : train.example_shape) spec.add_example_shape(d);
  spec.set_num_fields(num_fields);
  for (const EmbeddingTableSpec& table : tables) *spec.add_tables() = table;
  // The evaluator's own read of the test data, now: data that cannot serve
  // the model (another split's labels, images of another shape, a
  // truncated file) fails the job before it trains, not at the first
  // evaluation.
  if (HasTestData(job)) {
    coordinator.SetActivity("checking the test data");
    if (absl::StatusOr<TestData> test = LoadTestData(spec); !test.ok()) {
      return absl::Status(test.status().code(),
                          absl::StrCat("the test data cannot serve this job: ",
                                       test.status().message()));
    }
  }

  coordinator.SetActivity("waiting for the parameter servers to answer");
  RETURN_IF_ERROR(WaitForParameterServers(tf, options.security, deadline,
                                          coordinator.servers()));
  coordinator.SetActivity(
      "configuring the parameter servers and creating the variables");
  ParameterClient::Options client_options;
  client_options.rpc_timeout = absl::Seconds(60);
  prepared.client = ConnectToParameterServers(tf, placement, client_options,
                                              options.security);
  RETURN_IF_ERROR(
      ConfigureAsTheJobsChief(*prepared.client, ps, deadline, coordinator));
  RETURN_IF_ERROR(prepared.client->CreateVariables());
  RETURN_IF_ERROR(prepared.client->CreateTables(tables));
  if (CheckpointsConfigured(options)) {
    const CheckpointManagerOptions checkpoint_options =
        CheckpointOptions(options);
    // Every task learns the resolved directory (the evaluator reads it).
    spec.mutable_config()->mutable_checkpoint()->set_directory(
        checkpoint_options.directory);
    ASSIGN_OR_RETURN(
        prepared.checkpoints,
        CheckpointManager::Create(checkpoint_options, prepared.client.get()));
  }
  ASSIGN_OR_RETURN(bool resumed,
                   ResumeExistingModel(options, coordinator, prepared));
  if (resumed) return prepared;
  RETURN_IF_ERROR(InitializeModel(options, *model, tables, placement,
                                  coordinator, prepared));
  return prepared;
}

absl::Status WriteResult(const std::string& path, const JobCoordinator& c,
                         double training_seconds) {
  StatusResponse status = c.Status();
  std::string json = absl::StrCat(
      "{\"state\": ", JsonQuote(JobState_Name(status.state())),
      ", \"message\": ", JsonQuote(status.message()),
      ", \"global_step\": ", status.global_step(),
      ", \"total_steps\": ", status.total_steps(),
      ", \"training_seconds\": ", absl::StrFormat("%.3f", training_seconds));
  if (std::optional<EvaluationReport> eval = c.last_evaluation();
      eval.has_value() && eval->final()) {
    absl::StrAppend(
        &json,
        ", \"test_accuracy\": ", absl::StrFormat("%.6f", eval->accuracy()),
        ", \"test_loss\": ", absl::StrFormat("%.6f", eval->loss()),
        ", \"per_class_accuracy\": [",
        absl::StrJoin(eval->per_class_accuracy(), ", ",
                      [](std::string* out, double a) {
                        absl::StrAppend(out, absl::StrFormat("%.6f", a));
                      }),
        "]");
    if (eval->has_auc()) {
      absl::StrAppend(&json,
                      ", \"test_auc\": ", absl::StrFormat("%.6f", eval->auc()));
    }
    absl::StrAppend(&json,
                    ", \"evaluated_by\": ", JsonQuote(eval->evaluated_by()));
  }
  json += "}\n";
  std::ofstream out(path + ".tmp");
  out << json;
  out.close();
  if (!out || std::rename((path + ".tmp").c_str(), path.c_str()) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write the result file ", path));
  }
  return absl::OkStatus();
}

// Ends the job: records the outcome, tells every task and parameter
// server, lets the tasks hear it (bounded), stops serving.
absl::Status EndJob(absl::Status result, const ChiefOptions& options,
                    JobCoordinator& coordinator, ParameterClient* client,
                    CoordinatorServer& server, absl::Time training_start) {
  if (result.ok()) {
    coordinator.Succeed();
  } else {
    coordinator.Fail(std::string(result.message()));
  }
  if (!options.result_file.empty()) {
    absl::Status written =
        WriteResult(options.result_file, coordinator,
                    absl::ToDoubleSeconds(absl::Now() - training_start));
    if (!written.ok()) LOG(ERROR) << written.message();
  }
  while (std::optional<JobCoordinator::RestoreRequest> request =
             coordinator.TakeRestoreRequest()) {
    request->done(absl::FailedPreconditionError("the job is ending"));
  }
  // Every parameter server is told to stop, even when the job failed
  // before the chief connected to them, so no process outlives the job.
  std::unique_ptr<ParameterClient> fallback;
  if (client == nullptr) {
    ParameterClient::Options shutdown_options;
    shutdown_options.rpc_timeout = absl::Seconds(5);
    fallback = ConnectToParameterServers(options.tf_config, Placement(),
                                         shutdown_options, options.security);
    client = fallback.get();
  }
  LOG(INFO) << "stopping " << client->num_shards() << " parameter servers";
  coordinator.SetActivity("stopping the parameter servers");
  absl::Status shutdown =
      client->ShutdownAll(result.ok() ? "job finished" : "job failed");
  coordinator.servers().RecordShutdown(shutdown, absl::Now());
  if (!shutdown.ok()) LOG(WARNING) << shutdown.message();
  coordinator.SetActivity(
      "waiting for the other tasks to hear that the job ended (at most 5s)");
  // Tasks still running hear the outcome at their next status request
  // (about once a second); finished ones never ask again.
  std::vector<std::string> unaware =
      coordinator.WaitForOutcomeHeard(absl::Now() + absl::Seconds(5));
  if (!unaware.empty()) {
    LOG(WARNING) << "stopping without " << absl::StrJoin(unaware, ", ")
                 << " having heard the job's end; they will find the chief "
                    "gone and exit";
  }
  coordinator.SetActivity("exiting");
  server.Stop(absl::Seconds(1));
  return result;
}

// OK once every worker joined, or training already reached its end
// without the missing ones (a restored, finished job).
absl::Status AwaitWorkers(const ChiefOptions& options,
                          JobCoordinator& coordinator, const JobSpec& spec,
                          absl::Time deadline) {
  coordinator.SetActivity("waiting for every worker to join");
  std::vector<std::string> missing = coordinator.WaitForWorkers(deadline);
  if (coordinator.state() == FAILED) {
    // A worker that joined failed the job while others were starting: its
    // cause is the job's, not the late ones.
    return absl::AbortedError(coordinator.Status().message());
  }
  if (missing.empty()) {
    LOG(INFO) << "all " << spec.num_workers() << " workers joined; training";
    return absl::OkStatus();
  }
  if (coordinator.state() == TRAINING &&
      coordinator.Status().global_step() >= spec.total_steps()) {
    LOG(WARNING) << "training reached its end without "
                 << absl::StrJoin(missing, ", ");
    return absl::OkStatus();
  }
  return absl::DeadlineExceededError(
      absl::StrCat("workers that never joined by the startup deadline (",
                   absl::FormatDuration(options.startup_timeout),
                   "): ", absl::StrJoin(missing, ", ")));
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

RecoveryOptions RecoveryOptionsFor(const ChiefOptions& options,
                                   JobCoordinator& coordinator,
                                   Prepared& prepared) {
  RecoveryOptions recovery;
  recovery.tf_config = &options.tf_config;
  recovery.security = options.security;
  recovery.spec = &prepared.spec;
  recovery.coordinator = &coordinator;
  recovery.client = prepared.client.get();
  recovery.ps_return_timeout = options.ps_return_timeout;
  return recovery;
}

// OK when every server answers holding its variables (recovery.h).
absl::Status CheckServers(Prepared& prepared) {
  return CheckParameterServers(
      prepared.watch->Poll(),
      ExpectedVariablesPerServer(prepared.client->placement()));
}

// Supervises training until it ends (TrainingSupervisor).
absl::Status SuperviseTraining(const ChiefOptions& options,
                               JobCoordinator& coordinator, Prepared& prepared,
                               EventFileWriter* metrics,
                               const CheckpointMetrics* checkpoint_metrics) {
  ParameterClient& client = *prepared.client;
  const RecoveryOptions recovery =
      RecoveryOptionsFor(options, coordinator, prepared);
  SupervisorParts parts;
  parts.coordinator = &coordinator;
  parts.checkpoints = prepared.checkpoints.get();
  parts.metrics = metrics;
  parts.checkpoint_metrics = checkpoint_metrics;
  parts.check_servers = [&] { return CheckServers(prepared); };
  parts.restore = [&](const std::string& why, const std::string& checkpoint) {
    return PauseAndRestore(recovery, why, checkpoint);
  };
  parts.shutdown_server = [&client](int ps, const std::string& reason) {
    return client.Shutdown(ps, reason);
  };
  if (options.job.training().mode() == BOUNDED) {
    parts.exclude_workers = [&client](const std::vector<int>& workers) {
      return client.ExcludeWorkers(workers, absl::Seconds(2));
    };
  }
  SupervisorPolicy policy;
  policy.checkpoint = options.job.checkpoint();
  policy.log_interval = options.log_interval;
  policy.max_tick = std::min(options.log_interval, policy.max_tick);
  if (ChiefTermination* termination = options.termination;
      termination != nullptr) {
    parts.stop_requested = [termination] { return termination->requested(); };
  }
  TrainingSupervisor supervisor(std::move(parts), policy,
                                prepared.restored_step);
  coordinator.SetActivity("supervising training");
  if (options.termination != nullptr) options.termination->SetTraining(true);
  absl::Status supervised = supervisor.Supervise();
  if (options.termination != nullptr) options.termination->SetTraining(false);
  RETURN_IF_ERROR(supervised);
  if (coordinator.state() == FAILED) {
    return absl::AbortedError(coordinator.Status().message());
  }
  return absl::OkStatus();
}

enum class FinalSave { kSaved, kTrainAgain };

// After the last step: the final checkpoint. Every server must still hold
// its variables: one lost before or during the save (its state gone with
// it) is recovered as during training, by restoring the newest checkpoint
// everywhere, and the workers, who wait for the job's end
// (worker/trainer.h), train the steps since it again (kTrainAgain). A save
// that fails with every server healthy (a full disk) is tried again, then
// fails the job.
absl::StatusOr<FinalSave> SaveFinalCheckpoint(
    const ChiefOptions& options, JobCoordinator& coordinator,
    Prepared& prepared, const CheckpointMetrics* checkpoint_metrics) {
  CheckpointManager* checkpoints = prepared.checkpoints.get();
  if (checkpoints == nullptr) return FinalSave::kSaved;
  LOG(INFO) << "training reached global step "
            << coordinator.Status().global_step()
            << "; saving the final checkpoint";
  FaultPoint("chief.final_save");
  coordinator.SetActivity("saving the final checkpoint");
  constexpr int kAttempts = 3;
  absl::Status servers = CheckServers(prepared);
  for (int attempt = 1; servers.ok(); ++attempt) {
    absl::StatusOr<SavedCheckpoint> saved = checkpoints->Save();
    if (checkpoint_metrics != nullptr) checkpoint_metrics->Record(saved);
    if (saved.ok()) {
      LogSavedCheckpoint(*saved);
      return FinalSave::kSaved;
    }
    // A server lost during the save shows in its check.
    servers = CheckServers(prepared);
    if (servers.ok() && attempt == kAttempts) {
      return absl::Status(
          saved.status().code(),
          absl::StrCat("the final checkpoint failed ", kAttempts,
                       " times: ", saved.status().message()));
    }
    if (servers.ok()) {
      LOG(WARNING) << "the final checkpoint failed (trying again): "
                   << saved.status().message();
    }
  }
  if (absl::IsAborted(servers)) {
    return absl::AbortedError(
        absl::StrCat("this chief no longer controls the parameter servers: ",
                     servers.message()));
  }
  LOG(WARNING) << "parameter server lost at the final checkpoint: "
               << servers.message();
  const RecoveryOptions recovery =
      RecoveryOptionsFor(options, coordinator, prepared);
  RETURN_IF_ERROR(
      RecoverFromNewestCheckpoint(
          servers, checkpoints->directory(),
          absl::StrCat("recovering from a parameter server lost at the final "
                       "checkpoint (",
                       servers.message(), ")"),
          [&](const std::string& why, const std::string& checkpoint) {
            return PauseAndRestore(recovery, why, checkpoint);
          })
          .status());
  return FinalSave::kTrainAgain;
}

// The final evaluation (the evaluator's, or the chief's own when there is
// none or it was lost).
absl::Status FinalEvaluation(const ChiefOptions& options,
                             JobCoordinator& coordinator, Prepared& prepared) {
  FaultPoint("chief.final_evaluation");
  FinalEvaluationOptions evaluation;
  evaluation.has_evaluator =
      options.tf_config.cluster.HasJob(TaskType::kEvaluator);
  evaluation.evaluator_timeout = options.final_evaluation_timeout;
  evaluation.cpu_threads =
      std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return ObtainFinalEvaluation(evaluation, prepared.spec, *prepared.client,
                               coordinator);
}

}  // namespace

absl::Status RunChief(const ChiefOptions& chief_options) {
  // Every call this chief makes carries its incarnation: the servers follow
  // one chief of the job at a time (ps/chief_fence.h).
  ChiefOptions options = chief_options;
  options.security.chief_incarnation = NewChiefIncarnation();
  const TfConfig& tf = options.tf_config;
  const absl::Time deadline = absl::Now() + options.startup_timeout;
  JobCoordinator::Options coordinator_options;
  coordinator_options.num_workers = tf.cluster.NumTasks(TaskType::kWorker);
  for (const auto& [index, address] : tf.cluster.job(TaskType::kWorker)) {
    coordinator_options.worker_addresses[index] = address;
  }
  coordinator_options.heartbeat_timeout = options.heartbeat_timeout;
  coordinator_options.worker_replacement_timeout =
      options.worker_replacement_timeout;
  coordinator_options.chief_task = tf.ChiefTask().ToString();
  coordinator_options.chief_address = *tf.cluster.Address(tf.ChiefTask());
  for (const auto& [index, address] : tf.cluster.job(TaskType::kPs)) {
    coordinator_options.ps_addresses[index] = address;
  }
  if (tf.cluster.HasJob(TaskType::kEvaluator)) {
    const auto& evaluators = tf.cluster.job(TaskType::kEvaluator);
    if (!evaluators.empty()) {
      coordinator_options.evaluator_address = evaluators.begin()->second;
    }
  }
  coordinator_options.job_name = options.job.name();
  coordinator_options.mode = options.job.training().mode();
  JobCoordinator coordinator(coordinator_options);
  std::unique_ptr<MetricsRegistry::RefresherHandle> chief_metrics;
  std::unique_ptr<CheckpointMetrics> checkpoint_metrics;
  if (options.metrics_registry != nullptr) {
    ASSIGN_OR_RETURN(chief_metrics, ExportChiefMetrics(options.metrics_registry,
                                                       &coordinator));
    ASSIGN_OR_RETURN(checkpoint_metrics,
                     CheckpointMetrics::Create(options.metrics_registry));
  }

  ASSIGN_OR_RETURN(HostPort own,
                   ParseHostPort(*tf.cluster.Address(tf.ChiefTask())));
  ASSIGN_OR_RETURN(
      auto server,
      CoordinatorServer::Start(HostPort{options.bind_host, own.port}.ToString(),
                               options.security, &coordinator));
  if (!options.port_file.empty()) {
    RETURN_IF_ERROR(WritePortFile(options.port_file, server->port()));
  }
  LOG(INFO) << "coordinating " << JobConfigSummary(options.job)
            << "; serving on port " << server->port() << "; chief incarnation "
            << options.security.chief_incarnation;

  absl::Time training_start = absl::Now();
  absl::StatusOr<Prepared> prepared =
      PrepareJob(options, deadline, coordinator);
  if (!prepared.ok()) {
    return EndJob(prepared.status(), options, coordinator, nullptr, *server,
                  training_start);
  }
  coordinator.SetSpec(prepared->spec);
  ParameterClient* client = prepared->client.get();
  prepared->watch =
      std::make_unique<ServerWatch>(client, &coordinator.servers());
  auto end = [&](absl::Status result) {
    prepared->watch.reset();  // the servers are about to stop
    return EndJob(std::move(result), options, coordinator, client, *server,
                  training_start);
  };
  if (absl::Status joined =
          AwaitWorkers(options, coordinator, prepared->spec, deadline);
      !joined.ok()) {
    return end(joined);
  }
  coordinator.EndStartup();
  training_start = absl::Now();
  std::unique_ptr<EventFileWriter> metrics = OpenChiefMetrics(options);
  std::unique_ptr<SystemMetricsLogger> system_metrics;
  if (options.system_metrics && metrics != nullptr) {
    system_metrics = SystemMetricsLogger::StartOrWarn(
        DirName(metrics->path()), SystemMetricsLogger::Options());
  }
  while (true) {
    if (absl::Status trained =
            SuperviseTraining(options, coordinator, *prepared, metrics.get(),
                              checkpoint_metrics.get());
        !trained.ok()) {
      return end(trained);
    }
    LOG(INFO) << "training finished after "
              << absl::FormatDuration(absl::Trunc(absl::Now() - training_start,
                                                  absl::Milliseconds(100)));
    absl::StatusOr<FinalSave> saved = SaveFinalCheckpoint(
        options, coordinator, *prepared, checkpoint_metrics.get());
    if (!saved.ok()) return end(saved.status());
    if (*saved == FinalSave::kSaved) break;
    // Restored to an earlier step: the workers train the rest again.
    prepared->restored_step = coordinator.Status().global_step();
  }
  return end(FinalEvaluation(options, coordinator, *prepared));
}

}  // namespace psflow
