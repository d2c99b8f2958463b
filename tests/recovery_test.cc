// Recovery with real processes: a parameter server killed (SIGKILL) and
// restarted mid-job is recovered from the newest checkpoint, and
// `psctl ckpt restore` rolls a running job back to a checkpoint. Roles are
// started by hand (tests/manual_cluster.h), on free ports.
#include <signal.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
    EXPECT_THAT(cluster.Latest(worker)->Wait(absl::Seconds(30)),
                IsOkAndHolds(0))
        << cluster.Latest(worker)->Output();
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

TEST(RecoveryTest, KilledParameterServerIsRecoveredFromTheNewestCheckpoint) {
  const std::string dir = TempPath("ps_kill_ckpts");
  const std::string job = WriteTestFile(
      "ps_kill.json",
      TestJob("ASYNC", 4000,
              R"("checkpoint": {"save_every_steps": 300, "max_to_keep": 2})"));
  ManualCluster cluster(job, dir);
  cluster.StartAll();
  WaitForCheckpoints(dir, 1);
  // Down for 2 s: the chief notices, the workers wait.
  cluster.KillAndRestart("ps", 1, absl::Seconds(2));

  EXPECT_THAT(ExpectJobSucceeds(cluster),
              AllOf(HasSubstr("parameter server lost"),
                    HasSubstr("pausing the workers"),
                    HasSubstr("resuming at global step")));
  EXPECT_THAT(cluster.Latest("worker0")->Output(),
              HasSubstr("the chief restored the model"));
}

// A parameter server lost before the first scheduled checkpoint: the
// initial checkpoint the chief saved at step 0 is there to recover from,
// so the job goes on instead of failing.
TEST(RecoveryTest, ParameterServerLostBeforeTheFirstCheckpointIsRecovered) {
  const std::string dir = TempPath("ps_early_kill_ckpts");
  const std::string job = WriteTestFile(
      "ps_early_kill.json",
      TestJob(
          "ASYNC", 3000,
          R"("checkpoint": {"save_every_steps": 100000, "max_to_keep": 2})"));
  ManualCluster cluster(job, dir);
  cluster.StartAll();
  WaitForOutput(cluster.Latest("chief0"), "joined; training");
  ASSERT_THAT(ReadCheckpointState(dir),
              IsOkAndHolds(::testing::Property(
                  &CheckpointState::model_checkpoint_path, "ckpt-0")));
  cluster.KillAndRestart("ps", 0, absl::Seconds(1));

  EXPECT_THAT(ExpectJobSucceeds(cluster),
              AllOf(HasSubstr("parameter server lost"),
                    HasSubstr("restored " + dir + "/ckpt-0"),
                    HasSubstr("resuming at global step 0")));
}

// A chief that restarts in a job without checkpoints finds the servers
// holding the trained variables and resumes from them: it never
// overwrites them with initial values.
TEST(RecoveryTest, RestartedChiefWithoutCheckpointsResumesFromTheServers) {
  const std::string job =
      WriteTestFile("chief_kill_no_ckpt.json", TestJob("ASYNC", 4000, ""));
  ManualCluster cluster(job, "");
  cluster.StartAll();
  WaitForOutput(cluster.Latest("chief0"), "joined; training");
  WaitForOutput(cluster.Latest("worker0"), "step 1000 ");
  cluster.KillAndRestart("chief", 0, absl::Seconds(1));

  const std::string chief = ExpectJobSucceeds(cluster);
  EXPECT_THAT(chief, HasSubstr("resuming from them, which is newer than any "
                               "checkpoint"));
  EXPECT_THAT(chief, ::testing::Not(HasSubstr("initialized ")));
}

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
  ManualCluster cluster(job, dir);
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

TEST(RecoveryTest, KilledWorkerRestartsAndRejoinsAsyncTraining) {
  const std::string dir = TempPath("worker_kill_ckpts");
  const std::string job = WriteTestFile(
      "worker_kill.json",
      TestJob("ASYNC", 4000,
              R"("checkpoint": {"save_every_steps": 1000, "max_to_keep": 2})"));
  ManualCluster cluster(job, dir);
  cluster.StartAll();
  WaitForCheckpoints(dir, 1);
  // Down for 1 s: worker 0 trains on alone meanwhile.
  cluster.KillAndRestart("worker", 1, absl::Seconds(1));

  const std::string chief = ExpectJobSucceeds(cluster);
  EXPECT_THAT(chief, HasSubstr("worker-1 at 127.0.0.1:"));
  EXPECT_THAT(chief, HasSubstr("restarted (new incarnation)"));
}

// A sync job whose every step needs both workers: a killed worker is
// declared lost and waited for, not the end of the job; restarted, it
// registers again and the job finishes.
TEST(RecoveryTest, SyncJobWaitsForAKilledWorkersReplacement) {
  const std::string dir = TempPath("sync_worker_kill_ckpts");
  const std::string job = WriteTestFile(
      "sync_worker_kill.json",
      TestJob("SYNC", 2000,
              R"("checkpoint": {"save_every_steps": 500, "max_to_keep": 2})"));
  ManualCluster cluster(job, dir, {"--heartbeat_timeout_s=2"});
  cluster.StartAll();
  WaitForCheckpoints(dir, 1);
  Subprocess* worker1 = cluster.Latest("worker1");
  worker1->Signal(SIGKILL);
  ASSERT_OK(worker1->Wait(absl::Seconds(10)));
  WaitForOutput(cluster.Latest("chief0"),
                "training waits up to 4m for it to be restarted");
  cluster.Start("worker", 1);

  const std::string chief = ExpectJobSucceeds(cluster);
  EXPECT_THAT(chief, HasSubstr("restarted (new incarnation)"));
  EXPECT_THAT(chief, HasSubstr("has the 2 workers each step needs again"));
}

TEST(RecoveryTest, KilledBoundedWorkerReleasesTheBoundAndRejoins) {
  const std::string dir = TempPath("bounded_kill_ckpts");
  const std::string job = WriteTestFile(
      "bounded_kill.json",
      TestJob("BOUNDED", 3000,
              R"("checkpoint": {"save_every_steps": 500, "max_to_keep": 2})",
              64,
              std::string(::psflow::testing::kFashionMnist) +
                  "train-images-idx3-ubyte.gz",
              R"("max_staleness": 2)"));
  ManualCluster cluster(job, dir, {"--heartbeat_timeout_s=2"});
  cluster.StartAll();
  WaitForCheckpoints(dir, 1);
  // Worker 0 soon waits for the dead worker 1, until the chief declares it
  // lost and the servers drop it from the bound.
  Subprocess* worker1 = cluster.Latest("worker1");
  worker1->Signal(SIGKILL);
  ASSERT_OK(worker1->Wait(absl::Seconds(10)));
  Subprocess* chief = cluster.Latest("chief0");
  WaitForOutput(chief, "bounded-staleness training continues without it");
  WaitForOutput(chief, "workers outside the staleness bound: 1");
  // Back again: it joins at the slowest live worker's clock.
  cluster.Start("worker", 1);

  EXPECT_THAT(ExpectJobSucceeds(cluster), HasSubstr("worker-1 at 127.0.0.1:"));
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

// A chief killed while the servers and workers train on: the servers'
// model is consistent and newer than any checkpoint, so the restarted chief
// resumes from it and throws no work away.
TEST(RecoveryTest, KilledChiefRestartsAndResumesFromTheServersModel) {
  const std::string dir = TempPath("chief_kill_ckpts");
  const std::string job = WriteTestFile(
      "chief_kill.json",
      TestJob("ASYNC", 5000,
              R"("checkpoint": {"save_every_steps": 400, "max_to_keep": 2})"));
  ManualCluster cluster(job, dir);
  cluster.StartAll();
  WaitForCheckpoints(dir, 1);
  // Down for 1 s: workers and servers run on meanwhile.
  cluster.KillAndRestart("chief", 0, absl::Seconds(1));

  const std::string chief = ExpectJobSucceeds(cluster);
  EXPECT_THAT(chief, HasSubstr("resuming from them, which is newer than any "
                               "checkpoint"));
  EXPECT_THAT(chief, ::testing::Not(HasSubstr("restored ")));
  EXPECT_THAT(cluster.Latest("worker0")->Output(),
              HasSubstr("the chief restored the model"));
}

// The chief and a parameter server lost together: the server's state is
// gone, so the restarted chief restores the newest checkpoint everywhere.
TEST(RecoveryTest, KilledChiefAndServerRestoreTheNewestCheckpoint) {
  const std::string dir = TempPath("chief_ps_kill_ckpts");
  const std::string job = WriteTestFile(
      "chief_ps_kill.json",
      TestJob("ASYNC", 5000,
              R"("checkpoint": {"save_every_steps": 400, "max_to_keep": 2})"));
  ManualCluster cluster(job, dir);
  cluster.StartAll();
  WaitForCheckpoints(dir, 1);
  Subprocess* chief = cluster.Latest("chief0");
  chief->Signal(SIGKILL);
  ASSERT_OK(chief->Wait(absl::Seconds(10)));
  cluster.KillAndRestart("ps", 1, absl::Seconds(1));
  cluster.Start("chief", 0);

  const std::string output = ExpectJobSucceeds(cluster);
  EXPECT_THAT(output, AllOf(HasSubstr("ps-1 restarted and lost theirs"),
                            HasSubstr("restoring the newest checkpoint"),
                            HasSubstr("resuming at global step")));
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
