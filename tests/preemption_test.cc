// Preemption: SIGTERM to the chief mid-training (what Kubernetes sends
// before it evicts or preempts a pod) saves a checkpoint of the current
// step before the job stops, and the job started again resumes from it.
// Real processes (tests/manual_cluster.h) on free ports.
#include <dirent.h>
#include <signal.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/signals.h"
#include "common/status_matchers.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/local_run.h"
#include "tests/manual_cluster.h"
#include "tests/test_paths.h"

namespace psflow {
namespace {

using ::psflow::testing::LocalArgv;
using ::psflow::testing::ManualCluster;
using ::psflow::testing::TempPath;
using ::psflow::testing::TestJob;
using ::psflow::testing::WriteTestFile;
using ::testing::HasSubstr;
using ::testing::Not;

// The last number `pattern`'s first group matched in `text`.
std::optional<int64_t> LastMatch(const std::string& text,
                                 const std::string& pattern) {
  const std::regex re(pattern);
  std::optional<int64_t> last;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re);
       it != std::sregex_iterator(); ++it) {
    last = std::stoll((*it)[1].str());
  }
  return last;
}

// Waits until the chief's progress line reports at least `step`; returns
// the step it reported.
int64_t WaitForLoggedStep(Subprocess* chief, int64_t step) {
  const absl::Time deadline = absl::Now() + absl::Seconds(180);
  while (absl::Now() < deadline) {
    if (std::optional<int64_t> logged =
            LastMatch(chief->Output(), R"(\] step (\d+)/)");
        logged.has_value() && *logged >= step) {
      return *logged;
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  ADD_FAILURE() << "the chief never reported step " << step << ":\n"
                << chief->Output();
  return -1;
}

TEST(PreemptionTest, SigtermToTheChiefSavesTheStepAndTheJobResumesFromIt) {
  const std::string dir = TempPath("preemption_ckpts");
  // Only the initial checkpoint is scheduled: whatever is saved later is
  // the preemption save. Far more steps than the signal waits for, so it
  // lands mid-training however fast this machine is.
  const std::string checkpoints =
      R"("checkpoint": {"save_every_steps": 1000000})";
  const std::string job =
      WriteTestFile("preemption.json", TestJob("ASYNC", 1000000, checkpoints));
  int64_t saved = -1;
  {
    // Slowed workers: the signal surely lands mid-training.
    ManualCluster cluster(job, dir, {}, {{"worker", {"--slowdown=4"}}});
    cluster.StartAll();
    Subprocess* chief = cluster.Latest("chief0");
    const int64_t before = WaitForLoggedStep(chief, 100);
    chief->Signal(SIGTERM);
    EXPECT_THAT(chief->Wait(absl::Seconds(90)), IsOkAndHolds(128 + SIGTERM))
        << chief->Output();
    const std::string out = chief->Output();
    EXPECT_THAT(out, HasSubstr("received SIGTERM: pausing the workers and "
                               "saving a checkpoint of the current step"));
    EXPECT_THAT(out, Not(HasSubstr("not paused after")));
    saved = LastMatch(out, R"(after saving \S*ckpt-\d+ at global step (\d+))")
                .value_or(-1);
    // Every step the chief saw applied before the signal is in it.
    EXPECT_GE(saved, before) << out;
    // The others hear that the job stopped, and end.
    for (const char* task : {"worker0", "worker1", "evaluator0"}) {
      EXPECT_THAT(cluster.Latest(task)->Wait(absl::Seconds(60)),
                  IsOkAndHolds(1))
          << cluster.Latest(task)->Output();
    }
    for (const char* ps : {"ps0", "ps1"}) {
      EXPECT_THAT(cluster.Latest(ps)->Wait(absl::Seconds(60)), IsOkAndHolds(0))
          << cluster.Latest(ps)->Output();
    }
    EXPECT_THAT(cluster.Latest("worker0")->Output(),
                HasSubstr("stopped (received SIGTERM) after saving"));
  }
  ASSERT_GT(saved, 0);
  // Started again, to end a few hundred steps later: the job resumes at
  // the saved step and completes.
  ManualCluster resumed(
      WriteTestFile(
          "preemption_resumed.json",
          TestJob("ASYNC", static_cast<int>(saved + 300), checkpoints)),
      dir);
  resumed.StartAll();
  Subprocess* chief = resumed.Latest("chief0");
  EXPECT_THAT(chief->Wait(absl::Seconds(240)), IsOkAndHolds(0))
      << chief->Output();
  EXPECT_EQ(LastMatch(chief->Output(), R"(resuming at global step (\d+))"),
            saved)
      << chief->Output();
}

// SIGTERM to one parameter server (its pod evicted): it keeps serving
// while the chief pauses the workers and saves the current step, stops
// when the chief lets it go, and once it is started again the chief
// restores that checkpoint: the job goes on without losing a step.
TEST(PreemptionTest, SigtermToAServerSavesBeforeItGoesAndTheJobGoesOn) {
  const std::string dir = TempPath("server_preemption_ckpts");
  const std::string job =
      WriteTestFile("server_preemption.json",
                    TestJob("ASYNC", 10000,
                            R"("checkpoint": {"save_every_steps": 1000000})"));
  // Workers slowed well below this machine's pace, so the signal lands
  // mid-training (the chief logs its progress every 2 s).
  ManualCluster cluster(job, dir, {}, {{"worker", {"--slowdown=16"}}});
  cluster.StartAll();
  Subprocess* chief = cluster.Latest("chief0");
  const int64_t before = WaitForLoggedStep(chief, 100);
  Subprocess* ps = cluster.Latest("ps1");
  ps->Signal(SIGTERM);
  // Let go by the chief, well within its 70 s grace.
  EXPECT_THAT(ps->Wait(absl::Seconds(60)), IsOkAndHolds(0)) << ps->Output();
  EXPECT_THAT(ps->Output(), HasSubstr("the chief saved"));
  cluster.Start("ps", 1);  // as Kubernetes starts the pod again
  EXPECT_THAT(chief->Wait(absl::Seconds(240)), IsOkAndHolds(0))
      << chief->Output();
  const std::string out = chief->Output();
  EXPECT_THAT(out, HasSubstr("ps-1 is shutting down"));
  EXPECT_THAT(out, HasSubstr("saved before ps-1 shut down"));
  const std::optional<int64_t> saved =
      LastMatch(out, R"(resuming at global step (\d+))");
  ASSERT_TRUE(saved.has_value()) << out;
  // Every step applied before the signal is in the restored checkpoint.
  EXPECT_GE(*saved, before) << out;
}

// SIGTERM to the chief while a server's disk hangs (its save of the
// preemption checkpoint never returns): once --preemption_save_timeout_s
// has passed, the chief ends the job without that checkpoint, as a stop
// outside training does: the result file says so, the servers are told
// to stop, and the chief exits 143, well inside Kubernetes' grace.
TEST(PreemptionTest, ASaveOutlivingItsBoundEndsTheJobWithoutIt) {
  const std::string dir = TempPath("hung_save_ckpts");
  const std::string job =
      WriteTestFile("hung_save.json",
                    TestJob("ASYNC", 1000000,
                            R"("checkpoint": {"save_every_steps": 1000000})"));
  ManualCluster cluster(job, dir, {"--preemption_save_timeout_s=2"},
                        {{"worker", {"--slowdown=4"}}});
  // The servers' second save (the first is ckpt-0) hangs for 55 s.
  cluster.SetEnv("ps", {{"PSFLOW_FAULT_POINTS", "ps.save_shard=55s@2"}});
  cluster.StartAll();
  Subprocess* chief = cluster.Latest("chief0");
  WaitForLoggedStep(chief, 100);
  chief->Signal(SIGTERM);
  // The save's 2 s, then the stop's bound (15 s) at most.
  EXPECT_THAT(chief->Wait(absl::Seconds(60)), IsOkAndHolds(128 + SIGTERM))
      << chief->Output();
  const std::string out = chief->Output();
  EXPECT_THAT(out, HasSubstr("the checkpoint before stopping did not finish "
                             "within 2s"));
  std::ifstream result_file(cluster.result_file());
  std::stringstream result;
  result << result_file.rdbuf();
  EXPECT_THAT(result.str(), HasSubstr(R"("state": "FAILED")")) << out;
  EXPECT_THAT(result.str(),
              HasSubstr("without the checkpoint of the current step"))
      << out;
  EXPECT_THAT(out, HasSubstr("stopping 2 parameter servers"));
}

// Ctrl-C on `psctl local` (SIGINT): psctl has the chief save the current
// step before anything stops, then exits 130.
TEST(PreemptionTest, InterruptingPsctlLocalSavesTheCurrentStepFirst) {
  const std::string dir = TempPath("interrupted_local");
  const std::string checkpoints = TempPath("interrupted_local_ckpts");
  Subprocess psctl(
      LocalArgv(WriteTestFile("interrupted.json", TestJob("ASYNC", 100000)),
                dir, {"--checkpoint_dir=" + checkpoints}),
      {}, TempPath("interrupted_psctl.log"));
  ASSERT_OK(psctl.Start());
  const int64_t before = WaitForLoggedStep(&psctl, 100);
  psctl.Signal(SIGINT);
  EXPECT_THAT(psctl.Wait(absl::Seconds(120)), IsOkAndHolds(128 + SIGINT))
      << psctl.Output();
  const std::string out = psctl.Output();
  EXPECT_THAT(out, HasSubstr("saves a checkpoint of the current step"));
  const std::optional<int64_t> saved =
      LastMatch(out, R"(after saving \S*ckpt-\d+ at global step (\d+))");
  ASSERT_TRUE(saved.has_value()) << out;
  EXPECT_GE(*saved, before) << out;
  EXPECT_THAT(out, Not(HasSubstr("stopped tasks that did not exit in time")));
  // How to resume: the default checkpoint directory is emptied at start.
  EXPECT_THAT(out, HasSubstr("run it again with --checkpoint_dir="));
}

// The pid of the process whose TF_CONFIG is exactly `tf_config`, or -1.
pid_t PidWithTfConfig(const std::string& tf_config) {
  const std::string wanted = "TF_CONFIG=" + tf_config;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return -1;
  pid_t found = -1;
  while (dirent* e = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    std::ifstream environ_file(absl::StrCat("/proc/", pid, "/environ"),
                               std::ios::binary);
    std::string entry;
    while (std::getline(environ_file, entry, '\0')) {
      if (entry == wanted) found = pid;
    }
    if (found > 0) break;
  }
  closedir(proc);
  return found;
}

// The pid of `task` ("ps-0") of the psctl local job in `dir`, from the
// TF_CONFIG psctl wrote for it (the file holds it and a newline); -1 when
// no process has it.
pid_t TaskPid(const std::string& dir, const std::string& task) {
  std::ifstream tf_file(absl::StrCat(dir, "/tf_config/", task, ".json"));
  std::stringstream tf_config;
  tf_config << tf_file.rdbuf();
  return PidWithTfConfig(
      std::string(absl::StripTrailingAsciiWhitespace(tf_config.str())));
}

// psctl local restarts no task: once its workers were all killed (here as
// the kernel's out-of-memory killer would), the job stops at once, saving
// the current step first, instead of the chief waiting for a replacement.
TEST(PreemptionTest, PsctlLocalEndsAJobWhoseWorkersWereAllKilled) {
  const std::string dir = TempPath("killed_workers");
  const std::string checkpoints = TempPath("killed_workers_ckpts");
  Subprocess psctl(
      LocalArgv(WriteTestFile("killed_workers.json", TestJob("ASYNC", 100000)),
                dir,
                {"--chief", "--workers=1", "--checkpoint_dir=" + checkpoints}),
      {}, TempPath("killed_workers_psctl.log"));
  ASSERT_OK(psctl.Start());
  WaitForLoggedStep(&psctl, 100);
  const pid_t worker = TaskPid(dir, "worker-0");
  ASSERT_GT(worker, 0) << "no process with worker-0's TF_CONFIG";
  ASSERT_EQ(kill(worker, SIGKILL), 0);
  EXPECT_THAT(psctl.Wait(absl::Seconds(180)), IsOkAndHolds(1))
      << psctl.Output();
  const std::string out = psctl.Output();
  EXPECT_THAT(out, HasSubstr("every worker is gone, killed: worker-0 (Killed"));
  EXPECT_THAT(out, HasSubstr("psctl local restarts no task"));
  EXPECT_THAT(out, HasSubstr("saves a checkpoint of the current step"));
  EXPECT_THAT(out, Not(HasSubstr("stopped tasks that did not exit in time")));
}

// psctl's output piped into a reader that leaves after one line
// (`| head -1`): psctl drops the rest of its output and the job runs to
// its end, rather than psctl dying of SIGPIPE and stopping it.
TEST(PreemptionTest, AReaderThatLeavesDoesNotStopTheJob) {
  const std::string dir = TempPath("reader_left");
  std::string command = "set -o pipefail;";
  for (const std::string& arg :
       LocalArgv(WriteTestFile("reader_left.json", TestJob("ASYNC", 600)), dir,
                 {"--evaluator=false"})) {
    absl::StrAppend(&command, " '", arg, "'");
  }
  absl::StrAppend(&command, " | head -1");
  Subprocess pipeline({"/bin/bash", "-c", command}, {},
                      TempPath("reader_left.log"));
  ASSERT_OK(pipeline.Start());
  EXPECT_THAT(pipeline.Wait(absl::Seconds(180)), IsOkAndHolds(0))
      << pipeline.Output();
  std::ifstream result_file(dir + "/result.json");
  std::stringstream result;
  result << result_file.rdbuf();
  EXPECT_THAT(result.str(), HasSubstr("\"state\": \"SUCCEEDED\""));
}

// Without --chief, worker 0 coordinates and trains: another worker killed
// leaves it training (async needs no other), so psctl does not end the
// job as one whose workers are all gone.
TEST(PreemptionTest, AKilledWorkerLeavesTheCoordinatingWorkerTraining) {
  const std::string dir = TempPath("one_worker_left");
  Subprocess psctl(LocalArgv(WriteTestFile("one_worker_left.json",
                                           TestJob("ASYNC", 1000000)),
                             dir, {"--workers=2", "--evaluator=false"}),
                   {}, TempPath("one_worker_left_psctl.log"));
  ASSERT_OK(psctl.Start());
  const int64_t before = WaitForLoggedStep(&psctl, 100);
  const pid_t worker = TaskPid(dir, "worker-1");
  ASSERT_GT(worker, 0) << "no process with worker-1's TF_CONFIG";
  ASSERT_EQ(kill(worker, SIGKILL), 0);
  // Training goes on: the chief's progress line passes where it was.
  WaitForLoggedStep(&psctl, before + 2000);
  EXPECT_THAT(psctl.Output(), Not(HasSubstr("every worker is gone")));
  psctl.Signal(SIGINT);
  EXPECT_THAT(psctl.Wait(absl::Seconds(120)), IsOkAndHolds(128 + SIGINT))
      << psctl.Output();
}

// psctl local restarts no task: a parameter server that went (SIGTERM,
// as an operator's kill) is saved for and let go by the chief, which
// would then wait --ps_return_timeout_s (5 min) for it to come back. psctl
// ends the job at once instead, and the chief, waiting for a lost server,
// stops without another save it could not make.
TEST(PreemptionTest, PsctlLocalEndsAJobWhoseServerWentAway) {
  const std::string dir = TempPath("server_gone");
  const std::string checkpoints = TempPath("server_gone_ckpts");
  Subprocess psctl(
      LocalArgv(WriteTestFile("server_gone.json", TestJob("ASYNC", 1000000)),
                dir, {"--chief", "--checkpoint_dir=" + checkpoints}),
      {}, TempPath("server_gone_psctl.log"));
  ASSERT_OK(psctl.Start());
  WaitForLoggedStep(&psctl, 100);
  const pid_t ps = TaskPid(dir, "ps-0");
  ASSERT_GT(ps, 0) << "no process with ps-0's TF_CONFIG";
  ASSERT_EQ(kill(ps, SIGTERM), 0);
  // Well under the chief's 5 minute wait for the server.
  EXPECT_THAT(psctl.Wait(absl::Seconds(120)), IsOkAndHolds(1))
      << psctl.Output();
  const std::string out = psctl.Output();
  EXPECT_THAT(out, HasSubstr("saving a checkpoint before it goes"));
  EXPECT_THAT(out, HasSubstr("a parameter server is gone: ps-0"));
  EXPECT_THAT(out, HasSubstr("stopped by SIGTERM during training, while "
                             "waiting for the lost parameter servers"));
  EXPECT_THAT(out, Not(HasSubstr("stopped tasks that did not exit in time")));
}

// psctl local killed outright (SIGKILL: an OOM kill, a closed session's
// kill -9): each task gets SIGTERM from the kernel, and since the tasks
// write their own log files, nothing of psctl's end stops them first: the
// chief saves the current step, stops the servers, and every task exits.
TEST(PreemptionTest, KillingPsctlLocalStillSavesAndStopsEveryTask) {
  const std::string dir = TempPath("killed_psctl");
  const std::string checkpoints = TempPath("killed_psctl_ckpts");
  Subprocess psctl(
      LocalArgv(WriteTestFile("killed_psctl.json", TestJob("ASYNC", 100000)),
                dir, {"--chief", "--checkpoint_dir=" + checkpoints}),
      {}, TempPath("killed_psctl.log"));
  ASSERT_OK(psctl.Start());
  const int64_t before = WaitForLoggedStep(&psctl, 100);
  std::vector<std::pair<std::string, pid_t>> tasks;
  for (const char* task : {"chief-0", "ps-0", "worker-0", "worker-1"}) {
    const pid_t pid = TaskPid(dir, task);
    ASSERT_GT(pid, 0) << "no process with " << task << "'s TF_CONFIG";
    tasks.emplace_back(task, pid);
  }
  psctl.Signal(SIGKILL);
  EXPECT_THAT(psctl.Wait(absl::Seconds(30)), IsOkAndHolds(128 + SIGKILL));

  // Bounded by the chief's save deadline and the servers' grace, not by
  // this machine's speed: every task ends on its own.
  const absl::Time deadline = absl::Now() + absl::Seconds(150);
  for (const auto& [task, pid] : tasks) {
    while (!ProcessEnded(pid) && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    EXPECT_TRUE(ProcessEnded(pid))
        << task << " (pid " << pid << ") still runs with psctl gone";
  }
  std::ifstream chief_log(dir + "/chief-0.log");
  std::stringstream chief;
  chief << chief_log.rdbuf();
  const std::optional<int64_t> saved = LastMatch(
      chief.str(), R"(after saving \S*ckpt-\d+ at global step (\d+))");
  ASSERT_TRUE(saved.has_value()) << chief.str();
  EXPECT_GE(*saved, before) << chief.str();
  for (const auto& [task, pid] : tasks) {
    if (!ProcessEnded(pid)) kill(pid, SIGKILL);
  }
}

}  // namespace
}  // namespace psflow
