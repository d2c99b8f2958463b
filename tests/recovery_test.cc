// Recovery with real processes: tasks killed (SIGKILL) and restarted
// mid-job, as rows of one table (the job, when the fault strikes, the
// fault, what the job prints on its way to success); a stray second chief,
// and `psctl ckpt restore` rolling a running job back to a checkpoint, as
// tests of their own. Roles are started by hand (tests/manual_cluster.h),
// on free ports.
#include <signal.h>

#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "checkpoint/state_file.h"
#include "common/file_util.h"
#include "common/free_port.h"
#include "common/json.h"
#include "common/status_matchers.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/local_run.h"
#include "tests/manual_cluster.h"
#include "tests/test_paths.h"

namespace psflow {
namespace {

using ::psflow::testing::ManualCluster;
using ::psflow::testing::RunfilePath;
using ::psflow::testing::TempPath;
using ::psflow::testing::TestJob;
using ::psflow::testing::WriteTestFile;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

double ResultAccuracy(const std::string& result_file) {
  absl::StatusOr<std::string> text = ReadFileToString(result_file);
  EXPECT_OK(text);
  if (!text.ok()) return 0;
  absl::StatusOr<JsonValue> json = ParseJson(*text);
  EXPECT_OK(json);
  const JsonValue* accuracy = json.ok() ? json->Find("test_accuracy") : nullptr;
  EXPECT_NE(accuracy, nullptr) << *text;
  return accuracy == nullptr ? 0 : accuracy->number_value();
}

// The job ends well: the chief and every worker exit 0 and the model
// reaches its accuracy. Returns the chief's output.
std::string ExpectJobSucceeds(ManualCluster& cluster) {
  Subprocess* chief = cluster.Latest("chief0");
  EXPECT_THAT(chief->Wait(absl::Seconds(180)), IsOkAndHolds(0))
      << chief->Output();
  for (const char* worker : {"worker0", "worker1"}) {
    // The chief's side too: whether the worker was seen hearing the end.
    EXPECT_THAT(cluster.Latest(worker)->Wait(absl::Seconds(30)),
                IsOkAndHolds(0))
        << cluster.Latest(worker)->Output() << "\nthe chief's output:\n"
        << chief->Output();
  }
  EXPECT_GE(ResultAccuracy(cluster.result_file()), 0.80);
  return chief->Output();
}

// The checkpoints the state file names, leaving out the initial one the
// chief saves at step 0 before training.
std::vector<std::string> PeriodicCheckpoints(const std::string& dir) {
  std::vector<std::string> names;
  absl::StatusOr<CheckpointState> state = ReadCheckpointState(dir);
  if (!state.ok()) return names;
  for (const std::string& name : state->all_model_checkpoint_paths()) {
    if (name != "ckpt-0") names.push_back(name);
  }
  return names;
}

// Waits until the state file names at least `count` checkpoints saved
// during training (not counting the initial one).
void WaitForCheckpoints(const std::string& dir, int count) {
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (absl::Now() < deadline) {
    if (static_cast<int>(PeriodicCheckpoints(dir).size()) >= count) return;
    absl::SleepFor(absl::Milliseconds(50));
  }
  FAIL() << "fewer than " << count << " checkpoints in " << dir;
}

// Waits until `process` has printed `text`.
void WaitForOutput(Subprocess* process, const std::string& text) {
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (absl::Now() < deadline) {
    if (process->Output().find(text) != std::string::npos) return;
    absl::SleepFor(absl::Milliseconds(50));
  }
  FAIL() << "no \"" << text << "\" in:\n" << process->Output();
}

// A task of the job: "chief", "ps" or "worker", and its index.
struct Task {
  std::string type;
  int index = 0;
};

// A task SIGKILLed and started again after `downtime`, as an operator or
// Kubernetes would.
struct Restart {
  Task task;
  absl::Duration downtime;
};

// A line `task` ("chief0", "worker0") prints.
struct Line {
  std::string task;
  std::string text;
};

// The scenarios' job: TestJob's MLP on Fashion-MNIST.
struct ScenarioJob {
  std::string mode;  // ASYNC, SYNC or BOUNDED
  int steps = 0;
  // Periodic checkpoints (2 kept); 0: no checkpoint directory at all.
  int save_every_steps = 0;
  std::string training_extra = {};  // more fields of "training"
  std::vector<std::string> chief_flags = {};
};

// When the fault strikes: once the state file names `checkpoints`
// periodic checkpoints, then once each line is printed, in order.
struct Moment {
  int checkpoints = 0;
  std::vector<Line> lines = {};
  // Asserted then: the only checkpoint is the chief's initial ckpt-0.
  bool only_initial_checkpoint = false;
};

// `killed` are SIGKILLed first and stay down until the chief has printed
// each of `chief_while_down`; `restarted` go down and up in between.
struct Fault {
  std::vector<Task> killed = {};
  std::vector<Restart> restarted = {};
  std::vector<std::string> chief_while_down = {};
};

// What the job prints on its way to success (ExpectJobSucceeds).
// "{checkpoint_dir}" stands for the job's checkpoint directory.
struct Outcome {
  std::vector<std::string> chief_says = {};
  std::vector<std::string> chief_never_says = {};
  std::vector<std::string> worker0_says = {};
};

// Start a job, let it reach a moment, inflict a fault, and expect it to
// succeed saying how it recovered. A row may leave off the fields at the
// end of each part that have defaults.
struct RecoveryScenario {
  std::string name;  // the test's name
  std::string id;    // names its files: <id>.json, <id>_ckpts
  ScenarioJob job;
  Moment when;
  Fault fault;
  Outcome expect;
};

void PrintTo(const RecoveryScenario& scenario, std::ostream* os) {
  *os << scenario.name;
}

std::vector<RecoveryScenario> RecoveryScenarios() {
  const std::vector<std::string> short_heartbeats = {"--heartbeat_timeout_s=2"};
  return {
      // Down for 2 s: the chief notices, the workers wait.
      {"KilledParameterServerIsRecoveredFromTheNewestCheckpoint",
       "ps_kill",
       {"ASYNC", 4000, /*save_every_steps=*/300},
       {/*checkpoints=*/1},
       {/*killed=*/{}, /*restarted=*/{{{"ps", 1}, absl::Seconds(2)}}},
       {/*chief_says=*/{"parameter server lost", "pausing the workers",
                        "resuming at global step"},
        /*chief_never_says=*/{},
        /*worker0_says=*/{"the chief restored the model"}}},
      // A parameter server lost before the first scheduled checkpoint: the
      // initial checkpoint the chief saved at step 0 is there to recover
      // from, so the job goes on instead of failing.
      {"ParameterServerLostBeforeTheFirstCheckpointIsRecovered",
       "ps_early_kill",
       {"ASYNC", 3000, /*save_every_steps=*/100000},
       {/*checkpoints=*/0,
        {{"chief0", "joined; training"}},
        /*only_initial_checkpoint=*/true},
       {/*killed=*/{}, /*restarted=*/{{{"ps", 0}, absl::Seconds(1)}}},
       {/*chief_says=*/{"parameter server lost",
                        "restored {checkpoint_dir}/ckpt-0",
                        "resuming at global step 0"}}},
      // A chief that restarts in a job without checkpoints finds the
      // servers holding the trained variables and resumes from them: it
      // never overwrites them with initial values.
      {"RestartedChiefWithoutCheckpointsResumesFromTheServers",
       "chief_kill_no_ckpt",
       {"ASYNC", 4000, /*save_every_steps=*/0},
       {/*checkpoints=*/0,
        {{"chief0", "joined; training"}, {"worker0", "step 1000 "}}},
       {/*killed=*/{}, /*restarted=*/{{{"chief", 0}, absl::Seconds(1)}}},
       {/*chief_says=*/{"resuming from them, which is newer than any "
                        "checkpoint"},
        /*chief_never_says=*/{"initialized "}}},
      // Down for 1 s: worker 0 trains on alone meanwhile.
      {"KilledWorkerRestartsAndRejoinsAsyncTraining",
       "worker_kill",
       {"ASYNC", 4000, /*save_every_steps=*/1000},
       {/*checkpoints=*/1},
       {/*killed=*/{}, /*restarted=*/{{{"worker", 1}, absl::Seconds(1)}}},
       {/*chief_says=*/{"worker-1 at 127.0.0.1:",
                        "restarted (new incarnation)"}}},
      // A sync job whose every step needs both workers: a killed worker is
      // declared lost and waited for, not the end of the job; restarted,
      // it registers again and the job finishes.
      {"SyncJobWaitsForAKilledWorkersReplacement",
       "sync_worker_kill",
       {"SYNC", 2000, /*save_every_steps=*/500, "", short_heartbeats},
       {/*checkpoints=*/1},
       {/*killed=*/{{"worker", 1}},
        /*restarted=*/{},
        /*chief_while_down=*/
        {"training waits up to 4m for it to be restarted"}},
       {/*chief_says=*/{"restarted (new incarnation)",
                        "has the 2 workers each step needs again"}}},
      // Worker 0 soon waits for the dead worker 1, until the chief declares
      // it lost and the servers drop it from the bound. Back again, worker
      // 1 joins at the slowest live worker's clock.
      {"KilledBoundedWorkerReleasesTheBoundAndRejoins",
       "bounded_kill",
       {"BOUNDED", 3000, /*save_every_steps=*/500, R"("max_staleness": 2)",
        short_heartbeats},
       {/*checkpoints=*/1},
       {/*killed=*/{{"worker", 1}},
        /*restarted=*/{},
        /*chief_while_down=*/
        {"bounded-staleness training continues without it",
         "workers outside the staleness bound: 1"}},
       {/*chief_says=*/{"worker-1 at 127.0.0.1:"}}},
      // A chief killed while the servers and workers train on: the servers'
      // model is consistent and newer than any checkpoint, so the restarted
      // chief resumes from it and throws no work away. Down for 1 s:
      // workers and servers run on meanwhile.
      {"KilledChiefRestartsAndResumesFromTheServersModel",
       "chief_kill",
       {"ASYNC", 5000, /*save_every_steps=*/400},
       {/*checkpoints=*/1},
       {/*killed=*/{}, /*restarted=*/{{{"chief", 0}, absl::Seconds(1)}}},
       {/*chief_says=*/{"resuming from them, which is newer than any "
                        "checkpoint"},
        /*chief_never_says=*/{"restored "},
        /*worker0_says=*/{"the chief restored the model"}}},
      // The chief and a parameter server lost together: the server's state
      // is gone, so the restarted chief restores the newest checkpoint
      // everywhere.
      {"KilledChiefAndServerRestoreTheNewestCheckpoint",
       "chief_ps_kill",
       {"ASYNC", 5000, /*save_every_steps=*/400},
       {/*checkpoints=*/1},
       {/*killed=*/{{"chief", 0}},
        /*restarted=*/{{{"ps", 1}, absl::Seconds(1)}}},
       {/*chief_says=*/{"ps-1 restarted and lost theirs",
                        "restoring the newest checkpoint",
                        "resuming at global step"}}},
  };
}

// The job's config file: TestJob's model and training images, with the
// scenario's mode, length, checkpoints and training fields.
std::string WriteScenarioJob(const std::string& id, const ScenarioJob& spec) {
  const std::string checkpoint =
      spec.save_every_steps > 0
          ? absl::StrCat(R"("checkpoint": {"save_every_steps": )",
                         spec.save_every_steps, R"(, "max_to_keep": 2})")
          : "";
  return WriteTestFile(id + ".json",
                       TestJob(spec.mode, spec.steps, checkpoint, /*hidden=*/64,
                               std::string(::psflow::testing::kFashionMnist) +
                                   "train-images-idx3-ubyte.gz",
                               spec.training_extra));
}

class RecoveryScenarioTest : public ::testing::TestWithParam<RecoveryScenario> {
};

TEST_P(RecoveryScenarioTest, JobRecoversAndSucceeds) {
  const RecoveryScenario& scenario = GetParam();
  const ScenarioJob& spec = scenario.job;
  const std::string dir =
      spec.save_every_steps > 0 ? TempPath(scenario.id + "_ckpts") : "";
  const std::string job = WriteScenarioJob(scenario.id, spec);
  ManualCluster cluster(job, dir, spec.chief_flags);
  cluster.StartAll();

  if (scenario.when.checkpoints > 0) {
    WaitForCheckpoints(dir, scenario.when.checkpoints);
  }
  for (const Line& line : scenario.when.lines) {
    WaitForOutput(cluster.Latest(line.task), line.text);
  }
  if (scenario.when.only_initial_checkpoint) {
    ASSERT_THAT(ReadCheckpointState(dir),
                IsOkAndHolds(::testing::Property(
                    &CheckpointState::model_checkpoint_path, "ckpt-0")));
  }

  for (const Task& task : scenario.fault.killed) {
    Subprocess* process = cluster.Latest(absl::StrCat(task.type, task.index));
    process->Signal(SIGKILL);
    ASSERT_OK(process->Wait(absl::Seconds(10)));
  }
  for (const Restart& restart : scenario.fault.restarted) {
    cluster.KillAndRestart(restart.task.type, restart.task.index,
                           restart.downtime);
  }
  for (const std::string& text : scenario.fault.chief_while_down) {
    WaitForOutput(cluster.Latest("chief0"), text);
  }
  for (const Task& task : scenario.fault.killed) {
    cluster.Start(task.type, task.index);
  }

  const std::string chief = ExpectJobSucceeds(cluster);
  for (const std::string& text : scenario.expect.chief_says) {
    EXPECT_THAT(chief, HasSubstr(absl::StrReplaceAll(
                           text, {{"{checkpoint_dir}", dir}})));
  }
  for (const std::string& text : scenario.expect.chief_never_says) {
    EXPECT_THAT(chief, Not(HasSubstr(text)));
  }
  for (const std::string& text : scenario.expect.worker0_says) {
    EXPECT_THAT(cluster.Latest("worker0")->Output(), HasSubstr(text));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Faults, RecoveryScenarioTest, ::testing::ValuesIn(RecoveryScenarios()),
    [](const ::testing::TestParamInfo<RecoveryScenario>& info) {
      return info.param.name;
    });

// Not in the table: these act through a second chief or psctl rather than
// a killed task, and check that process's own exit and output.

// One job, one chief: a stray second chief of the job (its own address,
// its own checkpoint directory, the same parameter servers) can neither
// reconfigure, re-initialize nor stop the servers while the job's chief
// calls them; it gives up at its startup deadline naming the chief the
// servers follow, and the job goes on to succeed.
TEST(RecoveryTest, AStraySecondChiefChangesNothing) {
  const std::string dir = TempPath("stray_chief_ckpts");
  const std::string job = WriteTestFile(
      "stray_chief.json",
      TestJob("ASYNC", 6000,
              R"("checkpoint": {"save_every_steps": 1000, "max_to_keep": 2})"));
  // Workers slowed far below this machine's pace: the real job must still
  // run (its servers following its chief) through the stray's whole life,
  // its 5 s startup and its refused Shutdown, however fast the machine.
  ManualCluster cluster(job, dir, {}, {{"worker", {"--slowdown=48"}}});
  cluster.StartAll();
  WaitForOutput(cluster.Latest("chief0"), "joined; training");
  std::string tf_config = cluster.TfConfig("chief", 0);
  const std::string chief_address = cluster.Address("chief");
  ASSERT_OK_AND_ASSIGN(int stray_port, PickFreePort());
  tf_config.replace(tf_config.find(chief_address), chief_address.size(),
                    absl::StrCat("127.0.0.1:", stray_port));
  Subprocess stray(
      {RunfilePath("chief/chief"), "--allow_unauthenticated_callers",
       "--bind_host=127.0.0.1", "--job=" + job,
       "--checkpoint_dir=" + TempPath("stray_own_ckpts"),
       "--startup_timeout_s=5"},
      {{"TF_CONFIG", tf_config}}, TempPath("stray_chief.log"));
  ASSERT_OK(stray.Start());
  EXPECT_THAT(stray.Wait(absl::Seconds(60)), IsOkAndHolds(::testing::Ne(0)));
  EXPECT_THAT(stray.Output(), AllOf(HasSubstr("follows chief incarnation"),
                                    HasSubstr("Shutdown refused")));

  const std::string chief = ExpectJobSucceeds(cluster);
  EXPECT_THAT(chief, Not(HasSubstr("parameter server lost")));
}

TEST(RecoveryTest, PsctlRestoresACheckpointIntoARunningBoundedJob) {
  // The pause lifts the bound (a worker waiting for a slower one sees it
  // at once); after the restore every worker rejoins at the slowest clock.
  const std::string dir = TempPath("bounded_restore_ckpts");
  const std::string job = WriteTestFile(
      "bounded_restore.json",
      TestJob("BOUNDED", 3000,
              R"("checkpoint": {"save_every_steps": 300, "max_to_keep": 10})",
              64,
              std::string(::psflow::testing::kFashionMnist) +
                  "train-images-idx3-ubyte.gz",
              R"("max_staleness": 1)"));
  ManualCluster cluster(job, dir);
  cluster.StartAll();
  WaitForCheckpoints(dir, 2);
  const std::string first = dir + "/" + PeriodicCheckpoints(dir)[0];
  Subprocess restore({RunfilePath("client/psctl/psctl"), "ckpt", "restore",
                      first, "--tf_config=" + cluster.TfConfig("chief", 0)},
                     {}, TempPath("bounded_restore.log"));
  ASSERT_OK(restore.Start());
  EXPECT_THAT(restore.Wait(absl::Seconds(120)), IsOkAndHolds(0))
      << restore.Output();
  EXPECT_THAT(restore.Output(), HasSubstr("training resumed at global step"));
  EXPECT_THAT(ExpectJobSucceeds(cluster), HasSubstr("on request"));
  for (const char* worker : {"worker0", "worker1"}) {
    EXPECT_THAT(cluster.Latest(worker)->Output(),
                HasSubstr("the chief restored the model"));
  }
}

TEST(RecoveryTest, PsctlRestoresACheckpointIntoARunningJob) {
  const std::string dir = TempPath("restore_ckpts");
  const std::string job = WriteTestFile(
      "restore.json",
      TestJob("ASYNC", 5000,
              R"("checkpoint": {"save_every_steps": 300, "max_to_keep": 10})"));
  ManualCluster cluster(job, dir);
  cluster.StartAll();
  WaitForCheckpoints(dir, 2);
  const std::string first = dir + "/" + PeriodicCheckpoints(dir)[0];
  const std::string tf_config = cluster.TfConfig("chief", 0);

  // A damaged copy is refused before anything pauses.
  const std::string damaged = TempPath("damaged");
  ASSERT_OK(MakeDirectories(damaged));
  Subprocess refuse({RunfilePath("client/psctl/psctl"), "ckpt", "restore",
                     damaged, "--tf_config=" + tf_config},
                    {}, TempPath("refuse.log"));
  ASSERT_OK(refuse.Start());
  EXPECT_THAT(refuse.Wait(absl::Seconds(30)), IsOkAndHolds(1));
  EXPECT_THAT(refuse.Output(), HasSubstr("no index file"));

  Subprocess restore({RunfilePath("client/psctl/psctl"), "ckpt", "restore",
                      first, "--tf_config=" + tf_config},
                     {}, TempPath("restore.log"));
  ASSERT_OK(restore.Start());
  EXPECT_THAT(restore.Wait(absl::Seconds(120)), IsOkAndHolds(0))
      << restore.Output();
  EXPECT_THAT(restore.Output(),
              AllOf(HasSubstr("restored " + first),
                    HasSubstr("training resumed at global step")));

  EXPECT_THAT(ExpectJobSucceeds(cluster), HasSubstr("on request"));
}

}  // namespace
}  // namespace psflow
