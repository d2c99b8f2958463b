// psctl local with stand-in role binaries (shell scripts that sleep, or a
// file that cannot run): how it starts, stops and cleans up its processes.
#include "client/psctl/local_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/file_util.h"
#include "common/status_matchers.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/idx_files.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kRoles[][20] = {"ps/ps_server", "worker/worker",
                               "evaluator/evaluator", "chief/chief"};

// A fresh directory under the test's temporary directory.
std::string FreshDir(const std::string& name) {
  static std::atomic<int> next{0};
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name,
                                       "-", getpid(), "-", next++);
  EXPECT_EQ(mkdir(dir.c_str(), 0755), 0) << dir;
  return dir;
}

void WriteExecutable(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  ASSERT_EQ(chmod(path.c_str(), 0755), 0) << path;
}

// A --bin_dir whose role binaries each note their pid in <bin_dir>/pids,
// say "ready" and sleep; `unrunnable` (e.g. "evaluator/evaluator") is a
// file that cannot be run; with `background`, each first leaves a child
// of its own sleeping (noted too), as a wrapper script might.
std::string StandInBinDir(const std::string& unrunnable = "",
                          bool background = false) {
  const std::string bin_dir = FreshDir("bin");
  for (const char* role : kRoles) {
    const std::string path = absl::StrCat(bin_dir, "/", role);
    const std::string subdir = path.substr(0, path.rfind('/'));
    mkdir(subdir.c_str(), 0755);
    WriteExecutable(
        path,
        role == unrunnable
            ? "neither a binary nor a script\n"
            : absl::StrCat("#!/bin/sh\necho $$ >> ", bin_dir,
                           "/pids\necho ready\n",
                           background ? absl::StrCat("/bin/sleep 1000 & echo "
                                                     "$! >> ",
                                                     bin_dir, "/pids\n")
                                      : "",
                           "exec /bin/sleep 1000\n"));
  }
  return bin_dir;
}

// Pids the stand-ins noted so far.
std::vector<pid_t> StartedPids(const std::string& bin_dir) {
  std::ifstream in(bin_dir + "/pids");
  std::vector<pid_t> pids;
  std::string line;
  while (std::getline(in, line)) {
    int pid = 0;
    if (absl::SimpleAtoi(line, &pid)) pids.push_back(pid);
  }
  return pids;
}

// The job config is read and checked, never run: the stand-ins ignore it.
std::string JobFile() {
  const std::string path = FreshDir("job") + "/job.json";
  std::ofstream(path) << R"({
    "name": "stand_in",
    "model": {"softmax_regression": {}},
    "optimizer": {"kind": "SGD"},
    "learning_rate": {"learning_rate": 0.1},
    "data": {"train_images": "missing-images.gz",
             "train_labels": "missing-labels.gz"},
    "training": {"batch_size": 32, "steps": 100, "mode": "ASYNC"}
  })";
  return path;
}

// psctl local on `job` in `dir`, the stand-ins as its binaries, no TLS or
// tokens, on the CPU.
LocalClusterOptions StandInOptions(const std::string& job,
                                   const std::string& dir) {
  LocalClusterOptions options;
  options.job_path = job;
  options.dir = dir;
  options.bin_dir = StandInBinDir("");
  options.tls = false;
  options.tokens = false;
  options.device = "cpu";
  return options;
}

std::string PsctlPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".", "/",
                      workspace != nullptr ? workspace : "psflow",
                      "/client/psctl/psctl");
}

// `psctl local` as a process: one worker, `num_ps` servers, no evaluator,
// the stand-ins in `bin_dir` as its binaries, its --dir `dir`.
std::vector<std::string> StandInPsctlArgv(const std::string& bin_dir,
                                          const std::string& dir, int num_ps) {
  return {PsctlPath(),          "local",
          "--job=" + JobFile(), absl::StrCat("--ps=", num_ps),
          "--workers=1",        "--evaluator=false",
          "--dir=" + dir,       "--bin_dir=" + bin_dir,
          "--tls=false",        "--tokens=false",
          "--device=cpu"};
}

// While alive, orphaned descendants of this test become its children, so
// the test can see (and reap) every process psctl leaves behind.
class AdoptOrphans {
 public:
  AdoptOrphans() { EXPECT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0); }
  ~AdoptOrphans() { prctl(PR_SET_CHILD_SUBREAPER, 0); }
};

// True when this process has no children left, running or unreaped.
bool NoChildrenLeft() {
  int status;
  return waitpid(-1, &status, WNOHANG) == -1 && errno == ECHILD;
}

// Waits (a bound, not an expected time) for those of `pids` that are
// this process's children to end, reaping them; kills and reaps the ones
// still running at the bound, and returns those.
std::vector<pid_t> ReapOrKill(const std::vector<pid_t>& pids,
                              absl::Duration bound) {
  std::set<pid_t> running(pids.begin(), pids.end());
  const absl::Time deadline = absl::Now() + bound;
  while (true) {
    for (auto it = running.begin(); it != running.end();) {
      int status;
      // 0: our child, still running; anything else: reaped now, or not
      // (any longer) ours.
      it = waitpid(*it, &status, WNOHANG) == 0 ? std::next(it)
                                               : running.erase(it);
    }
    if (running.empty() || absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  for (pid_t pid : running) {
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
  }
  return {running.begin(), running.end()};
}

// Waits (a bound) for `count` stand-ins to have started.
bool WaitForStandIns(const std::string& bin_dir, size_t count,
                     Subprocess& psctl) {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (StartedPids(bin_dir).size() < count) {
    if (absl::Now() > deadline || psctl.Exited()) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

TEST(LocalClusterTest, ATaskThatCannotRunStopsTheTasksStartedBeforeIt) {
  AdoptOrphans adopt;
  LocalClusterOptions options;
  options.job_path = JobFile();
  options.num_ps = 2;
  options.num_workers = 2;
  options.evaluator = true;  // started last: ps, workers, then it
  options.dir = FreshDir("local");
  options.bin_dir = StandInBinDir("evaluator/evaluator");
  options.tls = false;
  options.tokens = false;
  options.device = "cpu";
  // Only a bound for a psctl that does not notice: the stand-ins sleep.
  options.timeout = absl::Seconds(60);
  std::ostringstream out;
  absl::StatusOr<int> code = RunLocalCluster(options, out);
  EXPECT_THAT(code,
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("cannot start evaluator-0"),
                             HasSubstr("evaluator/evaluator"),
                             HasSubstr("Exec format error"),
                             HasSubstr("ps-0, ps-1, worker-0, worker-1"))))
      << out.str();
  // Every task started was stopped and reaped: none left, none orphaned.
  EXPECT_TRUE(NoChildrenLeft());
  EXPECT_THAT(ReapOrKill(StartedPids(options.bin_dir), absl::ZeroDuration()),
              ::testing::IsEmpty());
}

// A second psctl local on the --dir of one still running is refused
// before it changes anything there (it would delete the running job's
// checkpoints and replace its credentials and TF_CONFIGs).
TEST(LocalClusterTest, ADirInUseIsRefusedBeforeAnythingInItChanges) {
  const std::string dir = FreshDir("busy");
  ASSERT_OK(MakeDirectories(dir + "/checkpoints/ckpt-100"));
  ASSERT_OK(WriteFileAtomically(dir + "/result.json", "{}"));
  // The running psctl's lock (a lock taken through another open file
  // conflicts within one process too).
  const int held = open((dir + "/psctl-local.lock").c_str(),
                        O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(held, 0);
  ASSERT_EQ(flock(held, LOCK_EX | LOCK_NB), 0);
  ASSERT_EQ(pwrite(held, "4242\n", 5, 0), 5);
  LocalClusterOptions options = StandInOptions(JobFile(), dir);
  std::ostringstream out;
  EXPECT_THAT(RunLocalCluster(options, out),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("belongs to a psctl local that is "
                                       "still running (pid 4242)"),
                             HasSubstr("another --dir"))));
  EXPECT_TRUE(PathExists(dir + "/checkpoints/ckpt-100"));
  EXPECT_TRUE(PathExists(dir + "/result.json"));
  EXPECT_FALSE(PathExists(dir + "/tf_config"));
  close(held);

  // A file where the folder should be.
  options.dir = FreshDir("busy") + "_file";
  ASSERT_OK(WriteFileAtomically(options.dir, "x"));
  EXPECT_THAT(RunLocalCluster(options, out),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("is not a directory")));
}

// psctl local writes, truncates and deletes inside --dir: in a folder
// another user can write, their links would aim those at this user's
// files. Such a folder (or one of theirs) is refused before anything in it
// or behind its links changes.
TEST(LocalClusterTest, AFolderOthersCanWriteIsRefused) {
  const std::string dir = FreshDir("shared");
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  const std::string victim = FreshDir("victim") + "/precious";
  ASSERT_OK(WriteFileAtomically(victim, "keep me"));
  ASSERT_OK(MakeDirectories(dir + "/tf_config"));
  ASSERT_EQ(symlink(victim.c_str(), (dir + "/ps-0.log").c_str()), 0);
  ASSERT_EQ(symlink(victim.c_str(), (dir + "/tf_config/ps-0.json").c_str()), 0);
  LocalClusterOptions options = StandInOptions(JobFile(), dir);
  std::ostringstream out;
  EXPECT_THAT(RunLocalCluster(options, out),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       AllOf(HasSubstr("writable by other users (mode 0777)"),
                             HasSubstr("--dir"))));
  ASSERT_OK_AND_ASSIGN(std::string kept, ReadFileToString(victim));
  EXPECT_EQ(kept, "keep me");
  EXPECT_FALSE(PathExists(dir + "/psctl-local.lock"));
  EXPECT_THAT(StartedPids(options.bin_dir), ::testing::IsEmpty());

  if (geteuid() == 0) {  // only root can give a folder or link away
    options.dir = FreshDir("theirs");
    ASSERT_EQ(chown(options.dir.c_str(), 65534, 65534), 0);
    EXPECT_THAT(RunLocalCluster(options, out),
                StatusIs(absl::StatusCode::kPermissionDenied,
                         HasSubstr("belongs to another user (uid 65534)")));
    // Their link to a folder of ours, named with a trailing "/" (which
    // lstat follows) or as a parent of --dir.
    const std::string ours = FreshDir("ours");
    const std::string link = FreshDir("links") + "/theirs";
    ASSERT_EQ(symlink(ours.c_str(), link.c_str()), 0);
    ASSERT_EQ(lchown(link.c_str(), 65534, 65534), 0);
    for (const std::string& dir : {link, link + "/", link + "/job"}) {
      options.dir = dir;
      EXPECT_THAT(RunLocalCluster(options, out),
                  StatusIs(absl::StatusCode::kPermissionDenied,
                           HasSubstr("is a link that belongs to another "
                                     "user (uid 65534)")))
          << dir;
    }
    EXPECT_FALSE(PathExists(ours + "/job"));
    EXPECT_FALSE(PathExists(ours + "/psctl-local.lock"));
  }
}

// data.synthesize generates a data set when data.train_path is missing;
// a real one there under other names (train.txt.gz) was deleted and
// replaced by synthetic data. psctl local never replaces files.
TEST(LocalClusterTest, SynthesizingNeverReplacesDataThatIsThere) {
  const std::string data = FreshDir("real_ctr");
  ASSERT_OK(WriteFileAtomically(data + "/train.txt.gz", "real training"));
  ASSERT_OK(WriteFileAtomically(data + "/test.txt.gz", "real test"));
  const std::string job = FreshDir("ctr_job") + "/job.json";
  std::ofstream(job) << absl::StrCat(R"({
    "name": "ctr",
    "model": {"wide_deep": {"embedding_dim": 4, "hidden_sizes": [8]}},
    "optimizer": {"kind": "SGD"},
    "learning_rate": {"learning_rate": 0.1},
    "data": {"format": "CRITEO", "train_path": ")",
                                     data, R"(/train.txt", "test_path": ")",
                                     data, R"(/test.txt",
             "synthesize": {"train_examples": 100, "test_examples": 50}},
    "training": {"batch_size": 8, "steps": 10, "mode": "ASYNC"}
  })");
  LocalClusterOptions options = StandInOptions(job, FreshDir("ctr_dir"));
  std::ostringstream out;
  EXPECT_THAT(RunLocalCluster(options, out),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("train.txt.gz exists"),
                             HasSubstr("never replaces data"))));
  ASSERT_OK_AND_ASSIGN(std::string kept,
                       ReadFileToString(data + "/train.txt.gz"));
  EXPECT_EQ(kept, "real training");
  EXPECT_FALSE(PathExists(data + "/train.txt"));
  EXPECT_THAT(StartedPids(options.bin_dir), ::testing::IsEmpty());
}

// A folder holding a job's credentials that psctl local did not make
// (psctl tfconfig gen --credentials writes <out>/tls and <out>/tokens) is
// not overwritten: the tasks started with them would be locked out.
TEST(LocalClusterTest, CredentialsItDidNotMakeAreNotReplaced) {
  const std::string dir = FreshDir("credentials");
  ASSERT_OK(MakeDirectories(dir + "/tls"));
  ASSERT_OK(WriteFileWithMode(dir + "/tls/ca.key", "the job's CA key", 0600));
  LocalClusterOptions options = StandInOptions(JobFile(), dir);
  options.tls = true;
  std::ostringstream out;
  EXPECT_THAT(RunLocalCluster(options, out),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("psctl local did not make"),
                             HasSubstr("name another --dir"))));
  ASSERT_OK_AND_ASSIGN(std::string kept, ReadFileToString(dir + "/tls/ca.key"));
  EXPECT_EQ(kept, "the job's CA key");
  EXPECT_THAT(StartedPids(options.bin_dir), ::testing::IsEmpty());
  // Refused again: the refusal left no trace of a psctl local run.
  EXPECT_FALSE(PathExists(dir + "/psctl-local.lock"));
  EXPECT_THAT(RunLocalCluster(options, out),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  // Without TLS, psctl local leaves tls/ alone: nothing to refuse there.
  options.tls = false;
  options.tokens = true;
  options.bin_dir = StandInBinDir("evaluator/evaluator");
  options.evaluator = true;
  options.timeout = absl::Seconds(60);
  EXPECT_THAT(RunLocalCluster(options, out),  // its evaluator cannot start
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("cannot start evaluator-0")));
  ASSERT_OK_AND_ASSIGN(kept, ReadFileToString(dir + "/tls/ca.key"));
  EXPECT_EQ(kept, "the job's CA key");
}

// A model that cannot take its data (Dense on 4x4 images) is a bad job
// config: refused before anything starts, as config check refuses it,
// not reported by every task once they have started.
TEST(LocalClusterTest, AModelThatCannotTakeItsDataStartsNothing) {
  ASSERT_OK_AND_ASSIGN(const std::string images,
                       testing::WriteIdxFile("images", {6, 4, 4},
                                             std::vector<uint8_t>(6 * 16, 7)));
  ASSERT_OK_AND_ASSIGN(
      const std::string labels,
      testing::WriteIdxFile("labels", {6}, {0, 1, 2, 0, 1, 2}));
  const std::string job = FreshDir("job") + "/job.json";
  std::ofstream(job) << absl::StrCat(R"({
    "model": {"graph": {"inputs": [{"name": "x", "features": {}}],
      "nodes": [{"name": "out", "inputs": ["x"],
                 "layer": {"Dense": {"units": 3}}}],
      "output": {"node": "out", "loss": "SOFTMAX_CROSS_ENTROPY"}}},
    "optimizer": {"kind": "SGD"},
    "learning_rate": {"learning_rate": 0.1},
    "data": {"train_images": ")",
                                     images, R"(", "train_labels": ")", labels,
                                     R"("},
    "training": {"batch_size": 2, "steps": 10, "mode": "ASYNC"}
  })");
  LocalClusterOptions options = StandInOptions(job, FreshDir("bad_model"));
  std::ostringstream out;
  EXPECT_THAT(RunLocalCluster(options, out),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("Dense takes a vector per example"),
                             HasSubstr("put a Flatten"))));
  EXPECT_FALSE(PathExists(options.bin_dir + "/pids")) << "a task started";
  EXPECT_FALSE(PathExists(options.dir + "/tf_config"));
}

// psctl cannot stop anyone when it is killed with SIGKILL: its tasks, in
// process groups of their own, get SIGTERM from the kernel instead.
TEST(LocalClusterTest, TasksDoNotOutliveAKilledPsctl) {
  AdoptOrphans adopt;
  const std::string bin_dir = StandInBinDir();
  const std::string dir = FreshDir("local");
  Subprocess psctl(StandInPsctlArgv(bin_dir, dir, 2), {}, dir + "/psctl.log");
  ASSERT_OK(psctl.Start());
  ASSERT_TRUE(WaitForStandIns(bin_dir, 3, psctl)) << psctl.Output();
  psctl.Signal(SIGKILL);
  ASSERT_THAT(psctl.Wait(absl::Seconds(30)), IsOkAndHolds(128 + SIGKILL));
  EXPECT_THAT(ReapOrKill(StartedPids(bin_dir), absl::Seconds(30)),
              ::testing::IsEmpty())
      << "tasks still running 30 s after psctl was killed";
  EXPECT_TRUE(NoChildrenLeft());
}

// The terminal psctl runs in closing: a stop, as on SIGTERM.
TEST(LocalClusterTest, SighupStopsTheJobAsSigtermDoes) {
  AdoptOrphans adopt;
  const std::string bin_dir = StandInBinDir();
  const std::string dir = FreshDir("local");
  Subprocess psctl(StandInPsctlArgv(bin_dir, dir, 1), {}, dir + "/psctl.log");
  ASSERT_OK(psctl.Start());
  ASSERT_TRUE(WaitForStandIns(bin_dir, 2, psctl)) << psctl.Output();
  psctl.Signal(SIGHUP);
  // A bound: the stand-in coordinator exits on SIGTERM at once.
  EXPECT_THAT(psctl.Wait(absl::Seconds(120)), IsOkAndHolds(128 + SIGHUP))
      << psctl.Output();
  EXPECT_THAT(psctl.Output(), HasSubstr("psctl local: hung up (SIGHUP)"));
  EXPECT_THAT(ReapOrKill(StartedPids(bin_dir), absl::ZeroDuration()),
              ::testing::IsEmpty());
  EXPECT_TRUE(NoChildrenLeft());
}

// A task's background child keeps the descriptor that tells psctl the
// task exited open: psctl still stops following the task's log once it
// reaped the task, so it exits when the job ends, not when the child does.
TEST(LocalClusterTest, ATasksLingeringChildDoesNotHoldPsctl) {
  AdoptOrphans adopt;
  const std::string bin_dir = StandInBinDir("", /*background=*/true);
  const std::string dir = FreshDir("local");
  Subprocess psctl(StandInPsctlArgv(bin_dir, dir, 1), {}, dir + "/psctl.log");
  ASSERT_OK(psctl.Start());
  ASSERT_TRUE(WaitForStandIns(bin_dir, 4, psctl)) << psctl.Output();
  psctl.Signal(SIGTERM);
  // A bound far below the children's 1000 s.
  EXPECT_THAT(psctl.Wait(absl::Seconds(120)), IsOkAndHolds(128 + SIGTERM))
      << psctl.Output();
  // The lingering children, adopted here, are this test's to end.
  ReapOrKill(StartedPids(bin_dir), absl::ZeroDuration());
  EXPECT_TRUE(NoChildrenLeft());
}

}  // namespace
}  // namespace psflow
