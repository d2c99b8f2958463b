#include "client/psctl/local_cluster.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "checkpoint/state_file.h"
#include "client/grpc_coordinator_client.h"
#include "client/psctl/job_certificates.h"
#include "client/psctl/synth_ctr_job.h"
#include "client/psctl/tfconfig_gen.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "common/free_port.h"
#include "common/job/job_config.h"
#include "common/json.h"
#include "common/mutex.h"
#include "common/oom_kills.h"
#include "common/rpc/credential_files.h"
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
  Task() = default;
  Task(Task&&) = default;
  Task& operator=(Task&&) = default;
  // Only a backstop for a path that drops a job without stopping it (the
  // orderly paths stop, reap and join everything first): a process still
  // running is killed and its reader joined, since destroying a joinable
  // std::thread aborts the whole of psctl.
  ~Task() {
    if (process != nullptr && reader.joinable()) {
      process->Signal(SIGKILL);
      (void)process->Wait(absl::InfiniteDuration());
    }
    JoinReader();
  }
  // Once the process was reaped: the reader copies what is left of the log
  // and ends, even while a descendant that inherited the exit descriptor
  // (a wrapper script's background child) keeps it open.
  void JoinReader() {
    if (reaped != nullptr) *reaped = true;  // null once moved from
    if (reader.joinable()) reader.join();
  }

  TaskId id;
  int port = 0;
  int metrics_port = 0;  // with --metrics
  std::string binary;
  std::vector<std::string> args;
  std::unique_ptr<Subprocess> process;
  std::thread reader;
  std::shared_ptr<std::atomic<bool>> reaped =
      std::make_shared<std::atomic<bool>>(false);
};

// Follows a task's log file, which the task writes itself, and copies
// each new line to `out` with `prefix`, until the task has exited
// (`exit_fd` reads end of file, or `reaped` says psctl reaped it) and its
// last line was copied. The task
// never writes into a pipe psctl reads: were psctl killed, its first line
// after that would end it (SIGPIPE), before it could save or stop.
void FollowOutput(const std::string& log_path, int exit_fd,
                  std::shared_ptr<const std::atomic<bool>> reaped,
                  const std::string& prefix, std::ostream& out, Mutex& out_mu) {
  const int log = open(log_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (log < 0) {
    MutexLock lock(&out_mu);
    out << prefix << "(cannot read " << log_path << ": " << std::strerror(errno)
        << "; the task's output is not shown)\n";
    return;
  }
  std::string pending;
  char buffer[65536];
  bool exited = false;
  while (true) {
    // Everything written so far; after the task's exit, the rest.
    while (true) {
      const ssize_t n = read(log, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      pending.append(buffer, n);
      size_t end = pending.rfind('\n');
      if (end == std::string::npos) continue;
      std::string lines = pending.substr(0, end + 1);
      pending.erase(0, end + 1);
      MutexLock lock(&out_mu);
      for (absl::string_view line : absl::StrSplit(
               absl::string_view(lines).substr(0, lines.size() - 1), '\n')) {
        out << prefix << line << "\n";
      }
      out.flush();
    }
    if (exited) break;
    // Wakes at once when the task exits; otherwise looks at the file
    // again 10 times a second.
    pollfd watch = {exit_fd, POLLIN, 0};
    const int ready = poll(&watch, 1, 100);
    if (ready > 0 || *reaped) exited = true;
  }
  close(log);
  if (!pending.empty()) {
    MutexLock lock(&out_mu);
    out << prefix << pending << "\n";
    out.flush();
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
  ProgressWatch(const std::string& chief_address, const TaskId& chief,
                absl::Duration stall_timeout, const TransportSecurity& security)
      : stall_timeout_(stall_timeout),
        chief_(chief_address, "the chief at " + chief_address, security,
               std::nullopt, chief.ToString()),
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

  // The job's state as the chief says it now; nullopt when it does not
  // answer.
  std::optional<JobState> State() {
    absl::StatusOr<StatusResponse> status = chief_.GetStatus(absl::Seconds(2));
    if (!status.ok()) return std::nullopt;
    return status->state();
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
  if (!SynthesizesCtrData(job)) {
    absl::Status matches = CheckSynthesizedDataMatches(job);
    if (!matches.ok()) {
      return absl::Status(
          matches.code(),
          absl::StrCat("job config ", job_path, ": ", matches.message()));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<SynthCtrOptions> options = SynthCtrOptionsOf(job);
  if (!options.ok()) {
    return absl::Status(options.status().code(),
                        absl::StrCat("job config ", job_path, ": ",
                                     options.status().message()));
  }
  SynthCtrOptions& o = *options;
  const std::string& dir = o.out_dir;
  // Never a file that is there: only the ".partial" files an interrupted
  // run left behind are cleared. Whatever else is there (a real data set
  // under another name: train.txt.gz) is the user's.
  o.overwrite = false;
  out << "generating " << o.num_train << " + " << o.num_test
      << " click-through-rate examples into " << dir << " ...\n";
  out.flush();
  absl::StatusOr<SynthCtrSummary> generated = GenerateSynthCtr(o);
  if (absl::IsAlreadyExists(generated.status())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job config ", job_path, ": data.train_path ", job.data().train_path(),
        " does not exist, so data.synthesize would generate a data set into ",
        dir, ", but ", generated.status().message(),
        ". psctl local never replaces data: name the files that are there "
        "in data.train_path and data.test_path, or remove them to have a "
        "synthetic set generated"));
  }
  ASSIGN_OR_RETURN(SynthCtrSummary summary, std::move(generated));
  out << absl::StrFormat(
      "generated %s: %d distinct ids in training, %.1f%% positive; the "
      "planted model's test AUC is %.4f (the best any model can do)\n",
      dir, summary.distinct_train_ids, 100 * summary.train_positive_rate,
      summary.planted_test_auc);
  return absl::OkStatus();
}

}  // namespace

namespace {

// Everything psctl local decides before it starts a process.
struct LocalJob {
  JobConfig config;
  std::vector<Task> tasks;
  // The tasks' ports by type, in index order (their TF_CONFIG cluster).
  std::map<TaskType, std::vector<int>> ports;
  // The task whose exit is the job's end: the chief, or worker 0.
  TaskId coordinator;
  std::string result_file;
  std::string checkpoint_dir;
  // psctl's own credentials, to watch the chief.
  TransportSecurity security;
};

// How the wait for the job's end ended: the exit status to use and, when
// psctl ended it (a signal, a timeout, a stall, a killed chief), why.
struct Ending {
  int exit_code = 0;
  std::string reason;
};

// psctl local runs every task on this host: more than this of a role is a
// typo, not a job (each is a process, a port and a certificate).
constexpr int kMaxLocalTasksPerRole = 256;

// psctl local writes, truncates and deletes inside --dir (its TF_CONFIGs,
// logs, credentials and default checkpoints): a folder another user could
// write to, or a link they own, would let them point those at any file
// this user may change. The folder must be this user's and writable by no
// one else (created 0700 when new; /tmp/psflow-local, the default, is
// refused when another user made it first).
absl::Status CheckJobFolder(const std::string& dir) {
  // Every link on the way (the folder itself, or one above it; a trailing
  // "/" would make lstat follow the last) must be this user's or root's.
  const std::string path = AbsolutePath(dir);
  for (size_t end = path.find('/', 1);; end = path.find('/', end + 1)) {
    const std::string prefix = path.substr(0, end);
    struct stat link;
    if (!prefix.empty() && lstat(prefix.c_str(), &link) == 0 &&
        S_ISLNK(link.st_mode) && link.st_uid != geteuid() && link.st_uid != 0) {
      return absl::PermissionDeniedError(absl::StrCat(
          "--dir=", dir, ": ", prefix,
          " is a link that belongs to another user (uid ", link.st_uid,
          "), who could point it anywhere; name a folder of your own"));
    }
    if (end == std::string::npos) break;
  }
  absl::Status own = MakePrivateDirectory(dir);
  if (!own.ok()) {
    return absl::Status(own.code(),
                        absl::StrCat("--dir: ", own.message(),
                                     " (e.g. --dir=$HOME/psflow-local)"));
  }
  return absl::OkStatus();
}

// psctl local makes new credentials in <dir>/tls and <dir>/tokens at
// every run. A folder psctl local never ran in that holds a job's
// credentials there was made by psctl certs gen, tokens gen or
// tfconfig gen --credentials: replacing them would lock out every task
// started with them and lose the CA's key.
absl::Status CheckNoForeignCredentials(const LocalClusterOptions& options,
                                       bool used_before) {
  if (used_before) return absl::OkStatus();
  std::vector<std::string> replaced;
  if (options.tls) replaced = {"tls/ca.key", "tls/ca.crt"};
  if (options.tokens) {
    replaced.insert(replaced.end(),
                    {"tokens/tokens.sha256", "tokens/admin.token"});
  }
  for (const std::string& file : replaced) {
    const std::string path = absl::StrCat(options.dir, "/", file);
    struct stat st;
    if (lstat(path.c_str(), &st) == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--dir=", options.dir, " holds a job's credentials (", path,
          ") that psctl local did not make; it makes its own at every run "
          "and would replace them, locking out the tasks started with them: "
          "name another --dir"));
    }
  }
  return absl::OkStatus();
}

// The job's --dir, held for the run: a second psctl local on the same
// folder would delete the running job's checkpoints and replace its
// credentials, TF_CONFIGs and logs. flock(2) on <dir>/psctl-local.lock,
// released when this process ends however it ends (close-on-exec: the
// tasks never hold it).
class DirLock {
 public:
  static absl::StatusOr<DirLock> Acquire(const std::string& dir) {
    struct stat st;
    if (stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat("--dir=", dir,
                       " is not a directory; name the folder for the job's "
                       "logs, TF_CONFIGs and result.json"));
    }
    RETURN_IF_ERROR(CheckJobFolder(dir));
    const std::string path = dir + "/psctl-local.lock";
    const int fd =
        open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot open ", path, ": ", std::strerror(errno),
                       "; name a --dir this user can write"));
    }
    DirLock lock(fd);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      char pid[32] = {};
      [[maybe_unused]] ssize_t n = pread(fd, pid, sizeof(pid) - 1, 0);
      return absl::FailedPreconditionError(absl::StrCat(
          "--dir=", dir, " belongs to a psctl local that is still running",
          pid[0] != '\0'
              ? absl::StrCat(" (pid ", absl::StripTrailingAsciiWhitespace(pid),
                             ")")
              : std::string(),
          "; wait for it to end, stop it (Ctrl-C saves a checkpoint), or "
          "name another --dir"));
    }
    const std::string own = absl::StrCat(getpid(), "\n");
    if (ftruncate(fd, 0) == 0) {
      [[maybe_unused]] ssize_t n = pwrite(fd, own.data(), own.size(), 0);
    }
    return lock;
  }
  DirLock(DirLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  DirLock& operator=(DirLock&&) = delete;
  ~DirLock() {
    if (fd_ >= 0) close(fd_);
  }

 private:
  explicit DirLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// Every problem psctl can find before any process starts: the options,
// the job config as the chief will read it (generating a CTR data set it
// asks for), the memory of the tasks this host will run, the binaries.
absl::StatusOr<JobConfig> CheckBeforeStarting(
    const LocalClusterOptions& options, std::ostream& out) {
  if (options.num_ps < 1 || options.num_workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--ps=", options.num_ps, " --workers=", options.num_workers,
        ": a job needs at least one of each"));
  }
  if (options.num_ps > kMaxLocalTasksPerRole ||
      options.num_workers > kMaxLocalTasksPerRole) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--ps=", options.num_ps, " --workers=", options.num_workers,
        ": psctl local runs every task on this host, at most ",
        kMaxLocalTasksPerRole,
        " of each; spread a larger job over hosts (psctl tfconfig gen)"));
  }
  if (options.dir.empty()) {
    return absl::InvalidArgumentError(
        "--dir is required: logs, TF_CONFIGs and result.json go there");
  }
  ASSIGN_OR_RETURN(JobConfig job, LoadJobConfigFile(options.job_path));
  if (absl::Status model = ValidateModelConfig(job.model()); !model.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job config ", options.job_path, ": ", model.message()));
  }
  RETURN_IF_ERROR(SynthesizeCtrDataIfMissing(job, options.job_path, out));
  // Every worker and the evaluator (a model of the evaluation batch, about
  // a worker's size) share this host's memory.
  absl::Status model_error;
  absl::StatusOr<MemoryEstimate> memory = CheckJobMemoryOnThisHost(
      job, options.num_workers + (options.evaluator ? 1 : 0), &model_error);
  if (!model_error.ok()) {
    // The model cannot take this data: a bad job config, refused before
    // anything starts.
    return absl::InvalidArgumentError(absl::StrCat(
        "job config ", options.job_path, ": ", model_error.message()));
  }
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
  return job;
}

// The tasks, a distinct free port each (a cluster spec never names a port
// twice; with metrics, a second one each), and every task's binary and
// flags.
absl::StatusOr<LocalJob> PlanTasks(const LocalClusterOptions& options,
                                   JobConfig config) {
  LocalJob job;
  job.config = std::move(config);
  const int num_tasks = (options.chief ? 1 : 0) + options.num_ps +
                        options.num_workers + (options.evaluator ? 1 : 0);
  ASSIGN_OR_RETURN(std::vector<int> free_ports,
                   PickFreePorts(options.metrics ? 2 * num_tasks : num_tasks));
  auto add = [&](TaskType type, int index) {
    Task task;
    task.id = TaskId{type, index};
    task.port = free_ports[job.tasks.size()];
    if (options.metrics)
      task.metrics_port = free_ports[num_tasks + job.tasks.size()];
    job.ports[type].push_back(task.port);
    job.tasks.push_back(std::move(task));
  };
  if (options.chief) add(TaskType::kChief, 0);
  for (int i = 0; i < options.num_ps; ++i) add(TaskType::kPs, i);
  for (int i = 0; i < options.num_workers; ++i) add(TaskType::kWorker, i);
  if (options.evaluator) add(TaskType::kEvaluator, 0);

  job.result_file = options.dir + "/result.json";
  job.checkpoint_dir = options.checkpoint_dir;
  if (job.checkpoint_dir.empty()) {
    job.checkpoint_dir = options.dir + "/checkpoints";
    RETURN_IF_ERROR(RemoveRecursively(job.checkpoint_dir));
  }
  job.coordinator = options.chief ? TaskId{TaskType::kChief, 0}
                                  : TaskId{TaskType::kWorker, 0};
  const std::string checkpoints = AbsolutePath(job.checkpoint_dir);
  for (Task& task : job.tasks) {
    const std::string bind = "--bind_host=127.0.0.1";
    const std::string logdir = "--logdir=" + options.dir + "/logs";
    switch (task.id.type) {
      case TaskType::kPs:
        task.binary = "ps/ps_server";
        task.args = {bind, logdir, "--checkpoint_root=" + checkpoints};
        if (!options.shared_memory) {
          task.args.push_back("--shared_memory=false");
        }
        if (!options.shared_memory_ring) {
          task.args.push_back("--shared_memory_ring=false");
        }
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
    if (task.id == job.coordinator) {
      task.args.push_back("--job=" + options.job_path);
      task.args.push_back("--result_file=" + job.result_file);
      task.args.push_back("--checkpoint_dir=" + checkpoints);
    }
    if (options.metrics) {
      task.args.push_back(absl::StrCat("--metrics_port=", task.metrics_port));
    }
  }
  return job;
}

// Fresh certificates for this run's hosts (<dir>/tls) and fresh job
// tokens (<dir>/tokens), every task pointed at them; or, with both off,
// every task open on 127.0.0.1.
absl::Status SecureTasks(const LocalClusterOptions& options, LocalJob& job) {
  if (options.tls) {
    std::map<TaskType, ClusterSpec::Job> hosts;
    for (const Task& task : job.tasks) {
      hosts[task.id.type][task.id.index] =
          absl::StrCat("127.0.0.1:", task.port);
    }
    const std::string tls_dir = AbsolutePath(options.dir + "/tls");
    ASSIGN_OR_RETURN(
        JobCertificates certificates,
        MakeJobCertificates(ClusterSpec(std::move(hosts)), job.config.name(),
                            absl::Hours(24 * 7)));
    RETURN_IF_ERROR(WriteJobCertificates(certificates, tls_dir,
                                         SecretOptions{"psflow-tls"}));
    for (Task& task : job.tasks) task.args.push_back("--tls_dir=" + tls_dir);
    ASSIGN_OR_RETURN(job.security,
                     LoadMutualTls(tls_dir + "/ca.crt", tls_dir + "/psctl.crt",
                                   tls_dir + "/psctl.key"));
  }
  if (options.tokens) {
    const std::string token_dir = AbsolutePath(options.dir + "/tokens");
    ASSIGN_OR_RETURN(auto tokens, GenerateJobTokens());
    RETURN_IF_ERROR(WriteJobTokens(tokens, token_dir));
    for (Task& task : job.tasks) {
      task.args.push_back("--token_dir=" + token_dir);
    }
    job.security.tokens.own = tokens.at(RpcRole::kAdmin);
  }
  if (!options.tls && !options.tokens) {
    // --tls=false --tokens=false said it: every task on 127.0.0.1, open.
    for (Task& task : job.tasks) {
      task.args.push_back("--allow_unauthenticated_callers");
    }
  }
  return absl::OkStatus();
}

// <dir>/prometheus_targets.json, Prometheus's file_sd format: one target
// group per task.
absl::Status ListMetricsTargets(const LocalClusterOptions& options,
                                const LocalJob& job) {
  std::string targets = "[\n";
  for (size_t t = 0; t < job.tasks.size(); ++t) {
    absl::StrAppend(&targets, t == 0 ? "" : ",\n",
                    "  {\"targets\": [\"127.0.0.1:", job.tasks[t].metrics_port,
                    "\"], \"labels\": {\"task\": \"",
                    job.tasks[t].id.ToString(), "\"}}");
  }
  absl::StrAppend(&targets, "\n]\n");
  return WriteFileAtomically(options.dir + "/prometheus_targets.json", targets);
}

// Stops the first `started` tasks after a later one could not start:
// SIGTERM (twice: a parameter server of a configured job takes the first
// as the start of a grace period), SIGKILL for any still running 5 s
// later; reaps them all and joins their readers. Returns their names.
std::vector<std::string> StopStartedTasks(LocalJob& job, size_t started) {
  std::vector<std::string> names;
  for (size_t t = 0; t < started; ++t) {
    names.push_back(job.tasks[t].id.ToString());
    job.tasks[t].process->Signal(SIGTERM);
  }
  RealClock().SleepFor(absl::Milliseconds(100));
  for (size_t t = 0; t < started; ++t) job.tasks[t].process->Signal(SIGTERM);
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  for (size_t t = 0; t < started; ++t) {
    Task& task = job.tasks[t];
    if (!task.process
             ->Wait(std::max(absl::ZeroDuration(), deadline - absl::Now()))
             .ok()) {
      task.process->Signal(SIGKILL);
      (void)task.process->Wait(absl::InfiniteDuration());
    }
  }
  for (size_t t = 0; t < started; ++t) job.tasks[t].JoinReader();
  return names;
}

// Starts every task with its TF_CONFIG (also kept in <dir>/tf_config/),
// in a process group of its own, its output copied to `out`.
//
// Each task gets SIGTERM from the kernel when psctl goes without stopping
// it (SIGKILL, a crash), so no server lingers until its chief timeout.
// The chief then saves the current step and stops the job as on Ctrl-C
// (a task writes its own log file, so psctl's end costs it nothing). The
// signal is tied to the thread that starts the tasks: this one,
// RunLocalCluster's caller, which also waits for the job and reaps every
// task before it returns.
//
// When a task cannot be started (a program that cannot run, out of file
// descriptors or processes), those already started are stopped and reaped
// and the error names the task and why.
absl::Status StartTasks(const LocalClusterOptions& options, LocalJob& job,
                        std::ostream& out, Mutex& out_mu) {
  RETURN_IF_ERROR(MakeDirectories(options.dir + "/tf_config"));
  for (size_t t = 0; t < job.tasks.size(); ++t) {
    Task& task = job.tasks[t];
    const std::string name = task.id.ToString();
    const std::string tf_config = TfConfigJson(job.ports, task.id);
    // Kept for the operator (and `psctl status`); the task reads its own
    // from its environment.
    RETURN_IF_ERROR(WriteFileAtomically(
        absl::StrCat(options.dir, "/tf_config/", name, ".json"),
        tf_config + "\n"));
    std::vector<std::string> argv = {
        absl::StrCat(options.bin_dir, "/", task.binary)};
    argv.insert(argv.end(), task.args.begin(), task.args.end());
    const std::string log_path = absl::StrCat(options.dir, "/", name, ".log");
    task.process = std::make_unique<Subprocess>(
        argv, std::map<std::string, std::string>{{"TF_CONFIG", tf_config}},
        log_path);
    task.process->set_watch_exit(true);
    // Ctrl-C reaches psctl alone, which stops the chief first
    // (StopChiefFirst).
    task.process->set_own_process_group(true);
    task.process->set_parent_death_signal(SIGTERM);
    absl::Status started = task.process->Start();
    // The tasks to stop if this one failed: those before it, and itself
    // when it runs.
    size_t running = t;
    if (started.ok()) {
      running = t + 1;
      try {
        task.reader = std::thread(
            FollowOutput, log_path, task.process->exit_fd(), task.reaped,
            absl::StrCat("[", name, "] "), std::ref(out), std::ref(out_mu));
      } catch (const std::system_error& e) {
        // It runs, unread: stopped with the others below.
        started = absl::ResourceExhaustedError(absl::StrCat(
            "cannot start a thread to read its output: ", e.what()));
      }
    }
    if (!started.ok()) {
      const std::vector<std::string> stopped = StopStartedTasks(job, running);
      return absl::Status(
          started.code(),
          absl::StrCat("cannot start ", name, ": ", started.message(),
                       stopped.empty()
                           ? ""
                           : absl::StrCat("; stopped the tasks already "
                                          "started (",
                                          absl::StrJoin(stopped, ", "), ")")));
    }
  }
  return absl::OkStatus();
}

// psctl restarts no task. Once every worker of a job with its own chief
// has exited and one of them was killed (the kernel's out-of-memory
// killer, an operator), none is left to train and none will come back, so the
// job ends now, naming them, rather than after the chief's wait for a
// replacement (--worker_replacement_timeout_s). nullopt otherwise.
std::optional<std::string> EveryWorkerGone(LocalJob& job,
                                           int64_t oom_kills_before) {
  // Worker 0 coordinating (no --chief) trains too: while it runs, a
  // worker is left, and its own end is the job's.
  if (job.coordinator.type == TaskType::kWorker) return std::nullopt;
  std::vector<std::string> killed;
  bool any = false;
  for (Task& task : job.tasks) {
    if (task.id.type != TaskType::kWorker) continue;
    any = true;
    if (!task.process->Exited()) return std::nullopt;
    absl::StatusOr<int> code = task.process->Wait(absl::ZeroDuration());
    if (code.ok() && *code > 128) {
      killed.push_back(absl::StrCat(
          task.id.ToString(), " (", strsignal(*code - 128),
          *code == 128 + SIGKILL ? OomKillNote(oom_kills_before) : "", ")"));
    }
  }
  if (!any || killed.empty()) return std::nullopt;
  return absl::StrCat(
      "every worker is gone, killed: ", absl::StrJoin(killed, ", "),
      "; psctl local restarts no task, so none is left to "
      "train");
}

// psctl restarts no task. A parameter server that exited while the job
// still trains or waits (paused, its chief waiting up to
// --ps_return_timeout_s for it to come back) never comes back, so the job
// ends now, naming it. At the job's end the chief stops the servers only
// once the outcome is decided (and its final evaluation needs none), so a
// server's exit then is no news (`job_ending` remembers it, so the chief
// is asked once). nullopt otherwise.
std::optional<std::string> AServerGone(LocalJob& job, ProgressWatch& chief,
                                       bool& job_ending) {
  if (job_ending) return std::nullopt;
  std::vector<std::string> gone;
  for (Task& task : job.tasks) {
    if (task.id.type != TaskType::kPs || !task.process->Exited()) continue;
    absl::StatusOr<int> code = task.process->Wait(absl::ZeroDuration());
    gone.push_back(absl::StrCat(
        task.id.ToString(), " (",
        !code.ok()    ? "exited"
        : *code > 128 ? absl::StrCat("killed: ", strsignal(*code - 128))
                      : absl::StrCat("exit ", *code),
        ")"));
  }
  if (gone.empty()) return std::nullopt;
  const std::optional<JobState> state = chief.State();
  if (!state.has_value()) return std::nullopt;  // asked again next time
  if (*state != TRAINING && *state != PAUSED && *state != INITIALIZING) {
    job_ending = true;
    return std::nullopt;
  }
  return absl::StrCat("a parameter server is gone: ", absl::StrJoin(gone, ", "),
                      "; psctl local restarts no task, so the job cannot go "
                      "on (its newest checkpoint is in the checkpoint "
                      "directory)");
}

// Waits for the coordinating task's exit, which is the job's end; or ends
// the job itself on a stop signal (the chief saving first), a timeout, a
// stall, workers that were all killed, or a server that went.
Ending WaitForTheJobsEnd(const LocalClusterOptions& options, LocalJob& job,
                         int64_t oom_kills_before, std::ostream& out,
                         Mutex& out_mu) {
  Task* coordinator = nullptr;
  for (Task& task : job.tasks) {
    if (task.id == job.coordinator) coordinator = &task;
  }
  const absl::Time start = absl::Now();
  ProgressWatch progress(
      absl::StrCat("127.0.0.1:", job.ports[job.coordinator.type][0]),
      job.coordinator, options.stall_timeout, job.security);
  Ending ending;
  bool server_exits_expected = false;  // the job is ending (AServerGone)
  while (true) {
    absl::StatusOr<int> code =
        coordinator->process->Wait(absl::Milliseconds(100));
    if (code.ok()) {
      ending.exit_code = *code;
      if (*code > 128) {
        // Killed: nobody told the other tasks, so stop them now rather
        // than wait for them to notice.
        ending.reason = absl::StrCat(
            job.coordinator.ToString(), " was killed (", strsignal(*code - 128),
            ")", *code == 128 + SIGKILL ? OomKillNote(oom_kills_before) : "");
      }
      return ending;
    }
    if (const int signal = stop_signal.load(); signal != 0) {
      ending.reason = signal == SIGINT   ? "interrupted (SIGINT)"
                      : signal == SIGHUP ? "hung up (SIGHUP)"
                                         : "terminated (SIGTERM)";
      ending.exit_code = 128 + signal;
      StopChiefFirst(*coordinator, ending.reason, out, out_mu);
      return ending;
    }
    if (std::optional<std::string> gone =
            EveryWorkerGone(job, oom_kills_before)) {
      ending.reason = *std::move(gone);
      ending.exit_code = 1;
      StopChiefFirst(*coordinator, ending.reason, out, out_mu);
      return ending;
    }
    if (std::optional<std::string> gone =
            AServerGone(job, progress, server_exits_expected)) {
      ending.reason = *std::move(gone);
      ending.exit_code = 1;
      StopChiefFirst(*coordinator, ending.reason, out, out_mu);
      return ending;
    }
    if (options.timeout > absl::ZeroDuration() &&
        absl::Now() - start > options.timeout) {
      ending.reason = absl::StrCat("timed out after ",
                                   absl::FormatDuration(options.timeout));
      ending.exit_code = 1;
      return ending;
    }
    if (std::optional<std::string> stalled = progress.Check()) {
      ending.reason = *std::move(stalled);
      ending.exit_code = 1;
      return ending;
    }
  }
}

// The tasks that did not end well, once every task is gone.
struct Stragglers {
  std::vector<std::string> stopped;  // still running: stopped by psctl
  std::vector<std::string> failed;   // exited non-zero on their own
};

// Everyone else should now be exiting on their own: the chief told every
// task it knew of before it stopped. One that is still running after a
// bounded time never will (it was still starting, and never reached the
// chief): it is stopped. One deadline for all, not one per task.
Stragglers StopTheRest(LocalJob& job, const Ending& ending,
                       int64_t oom_kills_before) {
  const absl::Time deadline =
      absl::Now() +
      (ending.reason.empty() ? absl::Seconds(10) : absl::Seconds(5));
  // Twice: a parameter server keeps serving after its first signal so a
  // chief can save (ps_server --termination_grace_s); the chief is done
  // by now, so the second stops it at once.
  for (int round = 0; round < 2 && !ending.reason.empty(); ++round) {
    for (Task& task : job.tasks) task.process->Signal(SIGTERM);
    if (round == 0) RealClock().SleepFor(absl::Milliseconds(100));
  }
  Stragglers left;
  for (Task& task : job.tasks) {
    absl::StatusOr<int> code = task.process->Wait(
        std::max(absl::ZeroDuration(), deadline - absl::Now()));
    if (!code.ok()) {
      left.stopped.push_back(task.id.ToString());
      task.process->Signal(SIGKILL);
      code = task.process->Wait(absl::Seconds(5));
    }
    if (ending.reason.empty() && code.ok() && *code != 0) {
      left.failed.push_back(absl::StrCat(
          task.id.ToString(), " (exit ", *code,
          *code > 128 ? absl::StrCat(": ", strsignal(*code - 128)) : "",
          *code == 128 + SIGKILL ? OomKillNote(oom_kills_before) : "", ")"));
    }
  }
  for (Task& task : job.tasks) task.JoinReader();
  return left;
}

// The job's outcome from <dir>/result.json, what psctl had to do, and how
// to resume a stopped job; returns the exit status.
int ReportOutcome(const LocalJob& job, const Ending& ending,
                  const Stragglers& left, std::ostream& out) {
  int exit_code = ending.exit_code;
  if (!left.stopped.empty()) {
    out << "psctl local: stopped tasks that did not exit in time: "
        << absl::StrJoin(left.stopped, ", ") << "\n";
    if (exit_code == 0) exit_code = 1;
  }
  if (!left.failed.empty()) {
    out << "psctl local: tasks that failed: "
        << absl::StrJoin(left.failed, ", ") << "\n";
    if (exit_code == 0) exit_code = 1;
  }
  std::ifstream result(job.result_file);
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
      if (steps != nullptr) {
        out << " after " << steps->number_value() << " steps";
      }
      if (seconds != nullptr) {
        out << " in " << seconds->number_value() << "s of training";
      }
      if (const JsonValue* auc = json->Find("test_auc"); auc != nullptr) {
        out << "; final test AUC " << auc->number_value();
      } else if (accuracy != nullptr) {
        out << "; final test accuracy " << accuracy->number_value();
      }
      out << " (" << job.result_file << ")\n";
    }
  }
  if (!ending.reason.empty()) out << "psctl local: " << ending.reason << "\n";
  if (stop_signal.load() != 0) {
    // The default checkpoint directory is emptied at every start: resuming
    // takes naming it.
    absl::StatusOr<std::optional<std::string>> latest =
        LatestCheckpoint(job.checkpoint_dir);
    if (latest.ok() && latest->has_value()) {
      out << "psctl local: to resume from " << **latest
          << ", run it again with --checkpoint_dir="
          << AbsolutePath(job.checkpoint_dir) << "\n";
    }
  }
  return exit_code;
}

}  // namespace

absl::StatusOr<int> RunLocalCluster(const LocalClusterOptions& options,
                                    std::ostream& out) {
  ASSIGN_OR_RETURN(JobConfig config, CheckBeforeStarting(options, out));
  // Before anything in --dir changes.
  // Its lock, or (before psctl local kept one) its TF_CONFIG copies, say
  // psctl local ran there.
  RETURN_IF_ERROR(CheckNoForeignCredentials(
      options, PathExists(options.dir + "/psctl-local.lock") ||
                   IsDirectory(options.dir + "/tf_config")));
  ASSIGN_OR_RETURN(DirLock dir_lock, DirLock::Acquire(options.dir));
  ASSIGN_OR_RETURN(LocalJob job, PlanTasks(options, std::move(config)));
  unlink(job.result_file.c_str());
  RETURN_IF_ERROR(SecureTasks(options, job));
  if (options.metrics) RETURN_IF_ERROR(ListMetricsTargets(options, job));

  stop_signal.store(0);
  // psctl's output going to a reader that left (`| head -1`, a closed
  // terminal's pipe) is no reason to end the job: writes to it fail
  // (EPIPE) and are dropped instead of killing psctl. A handler, not
  // SIG_IGN, so the tasks start with SIGPIPE's default action.
  struct sigaction quiet_pipe = {};
  quiet_pipe.sa_handler = [](int) {};
  sigemptyset(&quiet_pipe.sa_mask);
  sigaction(SIGPIPE, &quiet_pipe, nullptr);
  // SIGHUP (the terminal psctl runs in closing) stops the job as SIGTERM
  // does; the tasks, in process groups of their own, do not receive it.
  BlockTerminationSignals(Hangup::kStop);
  static std::once_flag watching;
  std::call_once(watching, [] {
    WatchTerminationSignals(
        [](const std::string& name) {
          stop_signal.store(name == "SIGINT"   ? SIGINT
                            : name == "SIGHUP" ? SIGHUP
                                               : SIGTERM);
          stop_signals_received.fetch_add(1);
        },
        Hangup::kStop);
  });
  Mutex out_mu;
  {
    MutexLock lock(&out_mu);
    out << "psctl local: " << options.num_ps << " ps, " << options.num_workers
        << " workers" << (options.evaluator ? ", evaluator" : "")
        << (options.chief ? ", chief" : " (worker-0 is the chief)")
        << "; logs in " << options.dir << "\n";
  }
  RETURN_IF_ERROR(StartTasks(options, job, out, out_mu));
  // A task killed by SIGKILL while this rises was killed for memory.
  const int64_t oom_kills_before = OomKillsSoFar();
  const Ending ending =
      WaitForTheJobsEnd(options, job, oom_kills_before, out, out_mu);
  const Stragglers left = StopTheRest(job, ending, oom_kills_before);
  MutexLock lock(&out_mu);
  return ReportOutcome(job, ending, left, out);
}

}  // namespace psflow
