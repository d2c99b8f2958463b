#include "client/psctl/local_cluster.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/state_file.h"
#include "client/grpc_coordinator_client.h"
#include "client/psctl/job_certificates.h"
#include "client/psctl/synth_ctr_job.h"
#include "client/psctl/tfconfig_gen.h"
#include "common/file_util.h"
#include "common/free_port.h"
#include "common/job/job_config.h"
#include "common/json.h"
#include "common/mutex.h"
#include "common/oom_kills.h"
#include "common/rpc/job_tokens.h"
#include "common/rpc/transport_security.h"
#include "common/signals.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "common/task.h"
#include "data/criteo.h"
#include "data/synth_ctr.h"
#include "model/job_memory_check.h"
#include "model/registry.h"

namespace psflow {
namespace {

struct Task {
  TaskId id;
  int port = 0;
  std::string binary;
  std::vector<std::string> args;
  std::unique_ptr<Subprocess> process;
  std::thread reader;
};

// Copies a child's output line by line to `out` (prefixed) and its log.
void PumpOutput(int fd, const std::string& prefix, const std::string& log_path,
                std::ostream& out, Mutex& out_mu) {
  std::ofstream log(log_path);
  std::string pending;
  char buffer[4096];
  while (true) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buffer, n);
    size_t newline;
    while ((newline = pending.find('\n')) != std::string::npos) {
      const std::string line = pending.substr(0, newline + 1);
      pending.erase(0, newline + 1);
      log << line;
      log.flush();
      MutexLock lock(&out_mu);
      out << prefix << line;
      out.flush();
    }
  }
  if (!pending.empty()) {
    log << pending << "\n";
    MutexLock lock(&out_mu);
    out << prefix << pending << "\n";
  }
}

// TF_CONFIG of `task` with every task on 127.0.0.1 at its port.
std::string TfConfigJson(const std::map<TaskType, std::vector<int>>& ports,
                         const TaskId& task) {
  std::map<TaskType, std::vector<std::string>> addresses;
  for (const auto& [type, job_ports] : ports) {
    for (int port : job_ports) {
      addresses[type].push_back(absl::StrCat("127.0.0.1:", port));
    }
  }
  return BuildTfConfigJson(addresses, task);
}

std::atomic<int> stop_signal{0};
std::atomic<int> stop_signals_received{0};
// The chief's preemption save bound (60 s) and time to end the job.
constexpr absl::Duration kChiefStopTimeout = absl::Seconds(75);

// A stop signal: the chief saves a checkpoint of the current step and ends
// the job (chief --preemption_save_timeout_s, 60 s by default) while the
// servers still serve; then the others are stopped. A second signal cuts
// the wait short.
void StopChiefFirst(Task& chief, const std::string& reason, std::ostream& out,
                    Mutex& out_mu) {
  {
    MutexLock lock(&out_mu);
    out << "psctl local: " << reason << "; " << chief.id.ToString()
        << " saves a checkpoint of the current step before the job stops "
           "(at most about a minute; signal again to stop at once)\n";
  }
  chief.process->Signal(SIGTERM);
  const int signals = stop_signals_received.load();
  const absl::Time deadline = absl::Now() + kChiefStopTimeout;
  while (absl::Now() < deadline && stop_signals_received.load() == signals) {
    if (chief.process->Wait(absl::Milliseconds(100)).ok()) return;
  }
}

// Asks the chief for the job's state and global step about once a second
// and reports a stall when neither changed for `stall_timeout`. The chief
// not answering counts as no progress.
class ProgressWatch {
 public:
  ProgressWatch(const std::string& chief_address, absl::Duration stall_timeout,
                const TransportSecurity& security)
      : stall_timeout_(stall_timeout),
        chief_(chief_address, "the chief at " + chief_address, security),
        last_change_(absl::Now()),
        next_check_(absl::Now() + absl::Seconds(1)) {}

  // nullopt while the job moves; otherwise why psctl local gives up.
  std::optional<std::string> Check() {
    if (stall_timeout_ <= absl::ZeroDuration() || absl::Now() < next_check_) {
      return std::nullopt;
    }
    next_check_ = absl::Now() + absl::Seconds(1);
    absl::StatusOr<StatusResponse> status = chief_.GetStatus(absl::Seconds(2));
    std::string seen =
        status.ok() ? absl::StrCat(JobState_Name(status->state()), " at step ",
                                   status->global_step(), " (generation ",
                                   status->generation(), ")")
                    : "the chief not answering";
    if (seen != last_seen_) {
      last_seen_ = seen;
      last_change_ = absl::Now();
      return std::nullopt;
    }
    if (absl::Now() - last_change_ < stall_timeout_) return std::nullopt;
    return absl::StrCat("no progress for ",
                        absl::FormatDuration(stall_timeout_), ": ", seen);
  }

 private:
  const absl::Duration stall_timeout_;
  GrpcCoordinatorClient chief_;
  std::string last_seen_;
  absl::Time last_change_;
  absl::Time next_check_;
};

}  // namespace

namespace {

// A CRITEO job config with `data.synthesize` whose training file does not
// exist yet: generates the planted-model data set it names (a few seconds
// for the default size), and says what the best possible AUC is.
absl::Status SynthesizeCtrDataIfMissing(const JobConfig& job,
                                        const std::string& job_path,
                                        std::ostream& out) {
  if (!SynthesizesCtrData(job)) return absl::OkStatus();
  absl::StatusOr<SynthCtrOptions> options = SynthCtrOptionsOf(job);
  if (!options.ok()) {
    return absl::Status(options.status().code(),
                        absl::StrCat("job config ", job_path, ": ",
                                     options.status().message()));
  }
  SynthCtrOptions& o = *options;
  const std::string& dir = o.out_dir;
  // A data set left half-written by an interrupted run is replaced.
  o.overwrite = true;
  out << "generating " << o.num_train << " + " << o.num_test
      << " click-through-rate examples into " << dir << " ...\n";
  out.flush();
  ASSIGN_OR_RETURN(SynthCtrSummary summary, GenerateSynthCtr(o));
  out << absl::StrFormat(
      "generated %s: %d distinct ids in training, %.1f%% positive; the "
      "planted model's test AUC is %.4f (the best any model can do)\n",
      dir, summary.distinct_train_ids, 100 * summary.train_positive_rate,
      summary.planted_test_auc);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int> RunLocalCluster(const LocalClusterOptions& options,
                                    std::ostream& out) {
  if (options.num_ps < 1 || options.num_workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--ps=", options.num_ps, " --workers=", options.num_workers,
        ": a job needs at least one of each"));
  }
  if (options.dir.empty()) {
    return absl::InvalidArgumentError(
        "--dir is required: logs, TF_CONFIGs and result.json go there");
  }
  // Fail before starting anything when the job config is bad.
  // Every problem the chief would find in the config, before any process
  // starts.
  ASSIGN_OR_RETURN(JobConfig job, LoadJobConfigFile(options.job_path));
  if (absl::Status model = ValidateModelConfig(job.model()); !model.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job config ", options.job_path, ": ", model.message()));
  }
  RETURN_IF_ERROR(SynthesizeCtrDataIfMissing(job, options.job_path, out));
  // Every worker and the evaluator (a model of the evaluation batch, about
  // a worker's size) share this host's memory.
  absl::StatusOr<MemoryEstimate> memory = CheckJobMemoryOnThisHost(
      job, options.num_workers + (options.evaluator ? 1 : 0));
  if (absl::IsResourceExhausted(memory.status())) {
    return absl::Status(memory.status().code(),
                        absl::StrCat("job config ", options.job_path, ": ",
                                     memory.status().message()));
  }
  // Data it cannot read yet is the chief's to report, as the job's
  // outcome.
  if (memory.ok()) out << "memory: " << DescribeMemoryEstimate(*memory) << "\n";
  for (const char* binary : {"ps/ps_server", "worker/worker",
                             "evaluator/evaluator", "chief/chief"}) {
    const std::string path = absl::StrCat(options.bin_dir, "/", binary);
    if (access(path.c_str(), X_OK) != 0) {
      return absl::NotFoundError(absl::StrCat(
          "cannot find ", path,
          "; build with `bazel build //...` or pass "
          "--bin_dir=<directory holding ps/, worker/, chief/, evaluator/>"));
    }
  }
  RETURN_IF_ERROR(MakeDirectories(options.dir + "/tf_config"));

  // One distinct port per task: a cluster spec never names a port twice.
  const int num_tasks = (options.chief ? 1 : 0) + options.num_ps +
                        options.num_workers + (options.evaluator ? 1 : 0);
  // With metrics, a second port per task, all distinct too.
  ASSIGN_OR_RETURN(std::vector<int> free_ports,
                   PickFreePorts(options.metrics ? 2 * num_tasks : num_tasks));
  std::map<TaskType, std::vector<int>> ports;
  std::vector<Task> tasks;
  auto add = [&](TaskType type, int index) -> absl::Status {
    const int port = free_ports[tasks.size()];
    ports[type].push_back(port);
    Task task;
    task.id = TaskId{type, index};
    task.port = port;
    tasks.push_back(std::move(task));
    return absl::OkStatus();
  };
  if (options.chief) RETURN_IF_ERROR(add(TaskType::kChief, 0));
  for (int i = 0; i < options.num_ps; ++i)
    RETURN_IF_ERROR(add(TaskType::kPs, i));
  for (int i = 0; i < options.num_workers; ++i) {
    RETURN_IF_ERROR(add(TaskType::kWorker, i));
  }
  if (options.evaluator) RETURN_IF_ERROR(add(TaskType::kEvaluator, 0));

  const std::string result_file = options.dir + "/result.json";
  unlink(result_file.c_str());
  std::string checkpoint_dir = options.checkpoint_dir;
  if (checkpoint_dir.empty()) {
    checkpoint_dir = options.dir + "/checkpoints";
    RETURN_IF_ERROR(RemoveRecursively(checkpoint_dir));
  }
  const TaskId coordinator_task = options.chief ? TaskId{TaskType::kChief, 0}
                                                : TaskId{TaskType::kWorker, 0};
  for (Task& task : tasks) {
    const std::string bind = "--bind_host=127.0.0.1";
    const std::string logdir = "--logdir=" + options.dir + "/logs";
    switch (task.id.type) {
      case TaskType::kPs:
        task.binary = "ps/ps_server";
        task.args = {bind, logdir,
                     "--checkpoint_root=" + AbsolutePath(checkpoint_dir)};
        if (!options.shared_memory)
          task.args.push_back("--shared_memory=false");
        break;
      case TaskType::kChief:
        task.binary = "chief/chief";
        task.args = {bind, logdir};
        break;
      case TaskType::kWorker:
        task.binary = "worker/worker";
        task.args = {bind, logdir, "--device=" + options.device};
        if (auto it = options.worker_flags.find(task.id.index);
            it != options.worker_flags.end()) {
          task.args.insert(task.args.end(), it->second.begin(),
                           it->second.end());
        }
        break;
      case TaskType::kEvaluator:
        task.binary = "evaluator/evaluator";
        task.args = {bind, logdir, "--device=" + options.device};
        break;
    }
    if (task.id == coordinator_task) {
      task.args.push_back("--job=" + options.job_path);
      task.args.push_back("--result_file=" + result_file);
      task.args.push_back("--checkpoint_dir=" + AbsolutePath(checkpoint_dir));
    }
  }

  TransportSecurity security;  // psctl's own, to watch the chief
  if (options.tls) {
    std::map<TaskType, ClusterSpec::Job> jobs;
    for (const Task& task : tasks) {
      jobs[task.id.type][task.id.index] = absl::StrCat("127.0.0.1:", task.port);
    }
    const std::string tls_dir = AbsolutePath(options.dir + "/tls");
    ASSIGN_OR_RETURN(JobCertificates certificates,
                     MakeJobCertificates(ClusterSpec(std::move(jobs)),
                                         job.name(), absl::Hours(24 * 7)));
    RETURN_IF_ERROR(WriteJobCertificates(certificates, tls_dir,
                                         SecretOptions{"psflow-tls"}));
    for (Task& task : tasks) task.args.push_back("--tls_dir=" + tls_dir);
    ASSIGN_OR_RETURN(security,
                     LoadMutualTls(tls_dir + "/ca.crt", tls_dir + "/psctl.crt",
                                   tls_dir + "/psctl.key"));
  }
  if (options.tokens) {
    const std::string token_dir = AbsolutePath(options.dir + "/tokens");
    ASSIGN_OR_RETURN(auto tokens, GenerateJobTokens());
    RETURN_IF_ERROR(WriteJobTokens(tokens, token_dir));
    for (Task& task : tasks) task.args.push_back("--token_dir=" + token_dir);
    security.tokens.own = tokens.at(RpcRole::kAdmin);
  }
  if (!options.tls && !options.tokens) {
    // --tls=false --tokens=false said it: every task on 127.0.0.1, open.
    for (Task& task : tasks) {
      task.args.push_back("--allow_unauthenticated_callers");
    }
  }

  if (options.metrics) {
    // Prometheus's file_sd format: one target group per task.
    std::string targets = "[\n";
    for (size_t t = 0; t < tasks.size(); ++t) {
      const int port = free_ports[num_tasks + t];
      tasks[t].args.push_back(absl::StrCat("--metrics_port=", port));
      absl::StrAppend(
          &targets, t == 0 ? "" : ",\n", "  {\"targets\": [\"127.0.0.1:", port,
          "\"], \"labels\": {\"task\": \"", tasks[t].id.ToString(), "\"}}");
    }
    absl::StrAppend(&targets, "\n]\n");
    RETURN_IF_ERROR(
        WriteFileAtomically(options.dir + "/prometheus_targets.json", targets));
  }

  BlockTerminationSignals();
  WatchTerminationSignals([](const std::string& name) {
    stop_signal.store(name == "SIGINT" ? SIGINT : SIGTERM);
    stop_signals_received.fetch_add(1);
  });

  Mutex out_mu;
  {
    MutexLock lock(&out_mu);
    out << "psctl local: " << options.num_ps << " ps, " << options.num_workers
        << " workers" << (options.evaluator ? ", evaluator" : "")
        << (options.chief ? ", chief" : " (worker-0 is the chief)")
        << "; logs in " << options.dir << "\n";
  }
  for (Task& task : tasks) {
    const std::string name = task.id.ToString();
    const std::string tf_config = TfConfigJson(ports, task.id);
    std::ofstream(absl::StrCat(options.dir, "/tf_config/", name, ".json"))
        << tf_config << "\n";
    std::vector<std::string> argv = {
        absl::StrCat(options.bin_dir, "/", task.binary)};
    argv.insert(argv.end(), task.args.begin(), task.args.end());
    task.process = std::make_unique<Subprocess>(
        argv, std::map<std::string, std::string>{{"TF_CONFIG", tf_config}},
        /*log_path=*/"");
    // Ctrl-C reaches psctl alone, which stops the chief first (below).
    task.process->set_own_process_group(true);
    RETURN_IF_ERROR(task.process->Start());
    task.reader = std::thread(PumpOutput, task.process->output_fd(),
                              absl::StrCat("[", name, "] "),
                              absl::StrCat(options.dir, "/", name, ".log"),
                              std::ref(out), std::ref(out_mu));
  }

  // Wait for the task that coordinates: its exit is the job's end.
  Task* coordinator = nullptr;
  for (Task& task : tasks) {
    if (task.id == coordinator_task) coordinator = &task;
  }
  const absl::Time start = absl::Now();
  int exit_code = 0;
  std::string reason;
  // A task killed by SIGKILL while this rises was killed for memory.
  const int64_t oom_kills_before = OomKillsSoFar();
  ProgressWatch progress(
      absl::StrCat("127.0.0.1:", ports[coordinator_task.type][0]),
      options.stall_timeout, security);
  while (true) {
    absl::StatusOr<int> code =
        coordinator->process->Wait(absl::Milliseconds(100));
    if (code.ok()) {
      exit_code = *code;
      if (exit_code > 128) {
        // Killed: nobody told the other tasks, so stop them now rather
        // than wait for them to notice.
        reason = absl::StrCat(
            coordinator_task.ToString(), " was killed (",
            strsignal(exit_code - 128), ")",
            exit_code == 128 + SIGKILL ? OomKillNote(oom_kills_before) : "");
      }
      break;
    }
    if (stop_signal.load() != 0) {
      reason = stop_signal.load() == SIGINT ? "interrupted (SIGINT)"
                                            : "terminated (SIGTERM)";
      exit_code = 128 + stop_signal.load();
      StopChiefFirst(*coordinator, reason, out, out_mu);
      break;
    }
    if (options.timeout > absl::ZeroDuration() &&
        absl::Now() - start > options.timeout) {
      reason = absl::StrCat("timed out after ",
                            absl::FormatDuration(options.timeout));
      exit_code = 1;
      break;
    }
    if (std::optional<std::string> stalled = progress.Check()) {
      reason = *std::move(stalled);
      exit_code = 1;
      break;
    }
  }
  // Everyone else should now be exiting on their own: the chief told every
  // task it knew of before it stopped. One that is still running after a
  // bounded time never will (it was still starting, and never reached the
  // chief): it is stopped. One deadline for all, not one per task.
  const absl::Time deadline =
      absl::Now() + (reason.empty() ? absl::Seconds(10) : absl::Seconds(5));
  std::vector<std::string> stragglers, failures;
  // Twice: a parameter server keeps serving after its first signal so a
  // chief can save (ps_server --termination_grace_s); the chief is done
  // by now, so the second stops it at once.
  for (int round = 0; round < 2 && !reason.empty(); ++round) {
    for (Task& task : tasks) task.process->Signal(SIGTERM);
    if (round == 0) absl::SleepFor(absl::Milliseconds(100));
  }
  for (Task& task : tasks) {
    absl::StatusOr<int> code = task.process->Wait(
        std::max(absl::ZeroDuration(), deadline - absl::Now()));
    if (!code.ok()) {
      stragglers.push_back(task.id.ToString());
      task.process->Signal(SIGKILL);
      code = task.process->Wait(absl::Seconds(5));
    }
    if (reason.empty() && code.ok() && *code != 0) {
      failures.push_back(absl::StrCat(
          task.id.ToString(), " (exit ", *code,
          *code > 128 ? absl::StrCat(": ", strsignal(*code - 128)) : "",
          *code == 128 + SIGKILL ? OomKillNote(oom_kills_before) : "", ")"));
    }
  }
  for (Task& task : tasks) task.reader.join();

  MutexLock lock(&out_mu);
  if (!stragglers.empty()) {
    out << "psctl local: stopped tasks that did not exit in time: "
        << absl::StrJoin(stragglers, ", ") << "\n";
    if (exit_code == 0) exit_code = 1;
  }
  if (!failures.empty()) {
    out << "psctl local: tasks that failed: " << absl::StrJoin(failures, ", ")
        << "\n";
    if (exit_code == 0) exit_code = 1;
  }
  std::ifstream result(result_file);
  if (result) {
    std::stringstream text;
    text << result.rdbuf();
    absl::StatusOr<JsonValue> json = ParseJson(text.str());
    if (json.ok()) {
      const JsonValue* state = json->Find("state");
      const JsonValue* accuracy = json->Find("test_accuracy");
      const JsonValue* steps = json->Find("global_step");
      const JsonValue* seconds = json->Find("training_seconds");
      out << "psctl local: job "
          << (state != nullptr ? state->string_value() : "UNKNOWN");
      if (steps != nullptr)
        out << " after " << steps->number_value() << " steps";
      if (seconds != nullptr) {
        out << " in " << seconds->number_value() << "s of training";
      }
      if (const JsonValue* auc = json->Find("test_auc"); auc != nullptr) {
        out << "; final test AUC " << auc->number_value();
      } else if (accuracy != nullptr) {
        out << "; final test accuracy " << accuracy->number_value();
      }
      out << " (" << result_file << ")\n";
    }
  }
  if (!reason.empty()) out << "psctl local: " << reason << "\n";
  if (stop_signal.load() != 0) {
    // The default checkpoint directory is emptied at every start: resuming
    // takes naming it.
    absl::StatusOr<std::optional<std::string>> latest =
        LatestCheckpoint(checkpoint_dir);
    if (latest.ok() && latest->has_value()) {
      out << "psctl local: to resume from " << **latest
          << ", run it again with --checkpoint_dir="
          << AbsolutePath(checkpoint_dir) << "\n";
    }
  }
  return exit_code;
}

}  // namespace psflow
