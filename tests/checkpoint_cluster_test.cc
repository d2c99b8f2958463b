// Checkpoints with real processes: jobs through `psctl local` that save,
// are killed, resume on another number of parameter servers, and the
// `psctl ckpt` tools on what they wrote (exports read back by Python's
// standard library).
#include <dirent.h>
#include <signal.h>

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/reader.h"
#include "checkpoint/state_file.h"
#include "common/file_util.h"
#include "common/status_matchers.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/local_run.h"
#include "tests/test_paths.h"

namespace psflow {
namespace {

using ::psflow::testing::Command;
using ::psflow::testing::LocalArgv;
using ::psflow::testing::LocalRun;
using ::psflow::testing::Psctl;
using ::psflow::testing::RunCommand;
using ::psflow::testing::RunfilePath;
using ::psflow::testing::RunLocal;
using ::psflow::testing::TempPath;
using ::psflow::testing::TestAccuracy;
using ::psflow::testing::TestJob;
using ::psflow::testing::WriteTestFile;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string CheckpointEvery(int steps) {
  return absl::StrCat(R"("checkpoint": {"save_every_steps": )", steps,
                      R"(, "max_to_keep": 3})");
}

// The newest checkpoint the state file names.
std::string Latest(const std::string& dir) {
  absl::StatusOr<std::optional<std::string>> latest = LatestCheckpoint(dir);
  EXPECT_OK(latest);
  EXPECT_TRUE(latest.ok() && latest->has_value()) << dir;
  return latest.ok() && latest->has_value() ? **latest : "";
}

// Every checkpoint the state file lists opens and verifies.
void ExpectEveryListedCheckpointIntact(const std::string& dir) {
  absl::StatusOr<CheckpointState> state = ReadCheckpointState(dir);
  if (absl::IsNotFound(state.status())) return;  // killed before the first
  ASSERT_OK(state);
  EXPECT_FALSE(state->model_checkpoint_path().empty());
  for (const std::string& name : state->all_model_checkpoint_paths()) {
    absl::StatusOr<std::unique_ptr<CheckpointReader>> reader =
        CheckpointReader::Open(dir + "/" + name);
    ASSERT_OK(reader) << name;
    EXPECT_THAT((*reader)->Verify(), ::testing::IsEmpty()) << name;
  }
}

// The pid of the chief process working on `checkpoint_dir`, or -1.
pid_t FindChief(const std::string& checkpoint_dir) {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return -1;
  pid_t found = -1;
  while (dirent* e = readdir(proc)) {
    const pid_t pid = atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream in(absl::StrCat("/proc/", pid, "/cmdline"));
    std::stringstream text;
    text << in.rdbuf();
    const std::string cmdline = text.str();
    if (absl::StrContains(cmdline, "chief/chief") &&
        absl::StrContains(cmdline, "--checkpoint_dir=" + checkpoint_dir)) {
      found = pid;
    }
  }
  closedir(proc);
  return found;
}

TEST(CheckpointClusterTest, SavedOnTwoServersResumesOnThreeAndExports) {
  const std::string dir = TempPath("resume_ckpts");
  const std::string flag = "--checkpoint_dir=" + dir;
  LocalRun first = RunLocal(
      WriteTestFile("first.json", TestJob("ASYNC", 1500, CheckpointEvery(400))),
      {"--ps=2", "--workers=2", flag});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_THAT(first.output, HasSubstr("saved " + dir + "/ckpt-"));
  const std::string newest = Latest(dir);
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(newest));
  EXPECT_EQ(reader->index().num_ps(), 2);
  EXPECT_GE(reader->index().global_step(), 1500);
  // The evaluator evaluated the final checkpoint and kept the best one.
  EXPECT_THAT(first.output, HasSubstr("new best checkpoint"));
  EXPECT_THAT(first.output,
              HasSubstr(absl::StrCat("final evaluation, step ",
                                     reader->index().global_step())));
  ASSERT_OK_AND_ASSIGN(std::string best,
                       ReadFileToString(dir + "/best/eval.json"));
  EXPECT_THAT(best, HasSubstr("\"accuracy\": 0.8"));

  Command list = Psctl({"ckpt", "list", dir});
  EXPECT_EQ(list.exit_code, 0) << list.output;
  EXPECT_THAT(list.output, AllOf(HasSubstr("(newest)"), HasSubstr("ASYNC")));
  Command verify = Psctl({"ckpt", "verify", newest});
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
  EXPECT_THAT(verify.output,
              HasSubstr(": OK, 12 tensors"));  // 4 x (values, m, v)
  Command inspect =
      Psctl({"ckpt", "inspect", newest, "--tensor=dense_1/bias", "--values"});
  EXPECT_EQ(inspect.exit_code, 0) << inspect.output;
  EXPECT_THAT(inspect.output, HasSubstr("dense_1/bias"));

  // Exports, read back by Python's standard library alone.
  const std::string st = TempPath("model.safetensors");
  const std::string npz = TempPath("model.npz");
  EXPECT_EQ(
      Psctl({"ckpt", "export", newest, "--format=safetensors", "--out=" + st})
          .exit_code,
      0);
  EXPECT_EQ(Psctl({"ckpt", "export", newest, "--format=npz", "--out=" + npz})
                .exit_code,
            0);
  Command check = RunCommand({"/usr/bin/env", "python3",
                              RunfilePath("tests/check_export.py"), st, npz,
                              "dense_0/kernel=784x64", "dense_0/bias=64",
                              "dense_1/kernel=64x10", "dense_1/bias=10"});
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_THAT(check.output, HasSubstr("OK, 4 tensors"));

  // Resume on three parameter servers; the job runs on to its new end.
  LocalRun second =
      RunLocal(WriteTestFile("second.json",
                             TestJob("ASYNC", 3000, CheckpointEvery(400))),
               {"--ps=3", "--workers=2", flag});
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_THAT(second.output,
              HasSubstr(absl::StrCat("resuming at global step ",
                                     reader->index().global_step())));
  EXPECT_GE(TestAccuracy(second), 0.80) << second.output;
  ASSERT_OK_AND_ASSIGN(auto resumed, CheckpointReader::Open(Latest(dir)));
  EXPECT_EQ(resumed->index().num_ps(), 3);
  EXPECT_GE(resumed->index().global_step(), 3000);
}

TEST(CheckpointClusterTest, SyncJobCheckpointsAtStepBoundariesAndResumes) {
  const std::string dir = TempPath("sync_ckpts");
  const std::string flag = "--checkpoint_dir=" + dir;
  const std::string checkpoint =
      R"("checkpoint": {"save_every_steps": 100, "max_to_keep": -1})";
  LocalRun run =
      RunLocal(WriteTestFile("sync.json", TestJob("SYNC", 1500, checkpoint)),
               {"--ps=2", "--workers=2", "--evaluator=false", flag});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_OK_AND_ASSIGN(CheckpointState state, ReadCheckpointState(dir));
  // At least one saved while the workers trained (the hold at work; the
  // chief looks every 250 ms), and the final one.
  EXPECT_GE(state.all_model_checkpoint_paths_size(), 2);
  for (const std::string& name : state.all_model_checkpoint_paths()) {
    ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(dir + "/" + name));
    // Every slice of every server at one step: a consistent snapshot.
    EXPECT_EQ(reader->index().min_version(), reader->index().max_version())
        << name;
    EXPECT_EQ(reader->index().global_step(), reader->index().max_version());
  }
  LocalRun resumed =
      RunLocal(WriteTestFile("sync2.json", TestJob("SYNC", 2000, checkpoint)),
               {"--ps=3", "--workers=2", flag});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_THAT(resumed.output, HasSubstr("resuming at global step"));
  EXPECT_GE(TestAccuracy(resumed), 0.70) << resumed.output;
}

// A damaged newest checkpoint: `psctl ckpt verify` names the damage, and a
// job started on the directory resumes from the next older kept checkpoint,
// setting the damaged one aside (renamed, no longer listed) so that its
// step is saved anew. With every kept checkpoint damaged, it refuses.
TEST(CheckpointClusterTest, ADamagedNewestCheckpointGivesWayToAnOlderOne) {
  const std::string dir = TempPath("damaged_ckpts");
  const std::string flag = "--checkpoint_dir=" + dir;
  LocalRun run = RunLocal(
      WriteTestFile("short.json", TestJob("ASYNC", 200, CheckpointEvery(100))),
      {"--ps=2", "--workers=1", "--evaluator=false", flag});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string newest = Latest(dir);
  ASSERT_OK_AND_ASSIGN(CheckpointState before, ReadCheckpointState(dir));
  ASSERT_GE(before.all_model_checkpoint_paths_size(), 2);
  const std::string older = dir + "/" +
                            before.all_model_checkpoint_paths(
                                before.all_model_checkpoint_paths_size() - 2);
  const std::string data = newest + "/data-00001-of-00002";
  ASSERT_OK_AND_ASSIGN(std::string bytes, ReadFileToString(data));
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x04;
  ASSERT_OK(WriteFileAtomically(data, flipped));

  Command verify = Psctl({"ckpt", "verify", newest});
  EXPECT_EQ(verify.exit_code, 1) << verify.output;
  EXPECT_THAT(verify.output,
              AllOf(HasSubstr("DAMAGED"), HasSubstr("data-00001-of-00002"),
                    HasSubstr("CRC-32C mismatch"), HasSubstr("tensor dense_")));

  LocalRun resumed = RunLocal(
      WriteTestFile("more.json", TestJob("ASYNC", 400, CheckpointEvery(100))),
      {"--ps=2", "--workers=1", "--evaluator=false", flag});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_THAT(resumed.output,
              AllOf(HasSubstr("skipped the damaged checkpoint " + newest),
                    HasSubstr("CRC-32C"),
                    HasSubstr("restored the newest intact one, " + older),
                    HasSubstr(newest + ".damaged")));
  ASSERT_OK_AND_ASSIGN(auto fresh, CheckpointReader::Open(Latest(dir)));
  EXPECT_GE(fresh->index().global_step(), 400);
  // The damaged copy is kept for inspection, and no longer listed (a save
  // of its step would write a new one).
  EXPECT_TRUE(IsDirectory(newest + ".damaged"));
  ASSERT_OK_AND_ASSIGN(CheckpointState state, ReadCheckpointState(dir));
  for (const std::string& name : state.all_model_checkpoint_paths()) {
    EXPECT_NE(dir + "/" + name, newest);
  }

  // Every kept checkpoint damaged (cut short): nothing to resume from.
  for (const std::string& name : state.all_model_checkpoint_paths()) {
    const std::string file = dir + "/" + name + "/data-00000-of-00002";
    ASSERT_OK_AND_ASSIGN(std::string content, ReadFileToString(file));
    ASSERT_OK(WriteFileAtomically(file, content.substr(0, content.size() / 2)));
  }
  LocalRun refused = RunLocal(
      WriteTestFile("again.json", TestJob("ASYNC", 600, CheckpointEvery(100))),
      {"--ps=2", "--workers=1", "--evaluator=false", flag});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(
      refused.output,
      AllOf(HasSubstr("cannot resume from the checkpoints in " + dir),
            HasSubstr("data-00000-of-00002"), HasSubstr("are damaged too")));
}

// The chief is killed (SIGKILL) at random moments while checkpoints are
// written back to back; the state file never names a broken checkpoint,
// and a restarted job resumes and still learns.
TEST(CheckpointClusterTest, KilledChiefNeverLeavesABrokenCheckpointAndResumes) {
  const std::string dir = TempPath("killed_ckpts");
  const std::string flag = "--checkpoint_dir=" + dir;
  // A wider layer (about 5 MB per checkpoint) saved every 25 steps, so
  // that kills land in the middle of saves.
  const std::string job = WriteTestFile(
      "killed.json", TestJob("ASYNC", 2500, CheckpointEvery(25), 512));
  std::mt19937 random(::testing::UnitTest::GetInstance()->random_seed());
  for (int attempt = 0; attempt < 3; ++attempt) {
    Subprocess psctl(LocalArgv(job, TempPath("killed_local"),
                               {"--ps=2", "--workers=1", "--chief",
                                "--evaluator=false", flag}),
                     {}, TempPath("killed_psctl.log"));
    ASSERT_OK(psctl.Start());
    // Wait for the first checkpoint of this attempt (a generous bound: it
    // waits on progress, not a clock), then a random while.
    const absl::Time deadline = absl::Now() + absl::Seconds(300);
    const std::string before = PathExists(dir + "/checkpoint")
                                   ? *ReadFileToString(dir + "/checkpoint")
                                   : "";
    while (absl::Now() < deadline &&
           (!PathExists(dir + "/checkpoint") ||
            *ReadFileToString(dir + "/checkpoint") == before)) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    absl::SleepFor(absl::Milliseconds(
        std::uniform_int_distribution<int>(50, 700)(random)));
    const pid_t chief = FindChief(dir);
    ASSERT_GT(chief, 0) << psctl.Output();
    if (attempt == 0) {
      // A second job on the same checkpoint directory fails at start,
      // naming the first, and never touches its checkpoints. (The first
      // chief is stopped meanwhile, so its job cannot end first.)
      ASSERT_EQ(kill(chief, SIGSTOP), 0);
      Subprocess second(LocalArgv(job, TempPath("second_local"),
                                  {"--ps=1", "--workers=1", "--chief",
                                   "--evaluator=false", flag}),
                        {}, TempPath("second_psctl.log"));
      ASSERT_OK(second.Start());
      absl::StatusOr<int> second_code = second.Wait(absl::Seconds(120));
      ASSERT_OK(second_code);
      EXPECT_NE(*second_code, 0);
      EXPECT_THAT(second.Output(),
                  AllOf(HasSubstr("is in use by another job (job test, "
                                  "chief-0, pid "),
                        HasSubstr("checkpoint.directory")))
          << second.Output();
    }
    ASSERT_EQ(kill(chief, SIGKILL), 0);
    absl::StatusOr<int> code = psctl.Wait(absl::Seconds(60));
    ASSERT_OK(code);
    EXPECT_NE(*code, 0);
    EXPECT_THAT(psctl.Output(), HasSubstr("was killed")) << psctl.Output();
    ExpectEveryListedCheckpointIntact(dir);
  }
  LocalRun last = RunLocal(job, {"--ps=2", "--workers=1", "--chief", flag});
  ASSERT_EQ(last.exit_code, 0) << last.output;
  EXPECT_THAT(last.output, HasSubstr("resuming at global step"));
  // The killed chief's lock was taken over, and said so.
  EXPECT_THAT(last.output,
              HasSubstr("took over the checkpoint directory from job test"));
  EXPECT_GE(TestAccuracy(last), 0.80) << last.output;
  ExpectEveryListedCheckpointIntact(dir);
}

}  // namespace
}  // namespace psflow
