// `psctl status` against a real job in each phase: starting with a task
// missing, training, waiting for its final evaluation, and after the chief
// is gone (with a stray task that has not exited). Every wait is for
// progress that psctl reports, never for time.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
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
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

struct StatusRun {
  int exit_code = -1;
  std::string output;
};

StatusRun PsctlStatus(const ManualCluster& cluster) {
  static int runs = 0;
  Subprocess psctl(
      {RunfilePath("client/psctl/psctl"), "status",
       "--tf_config=" + cluster.TfConfig("worker", 0), "--timeout=3"},
      {}, TempPath(absl::StrCat("status", ++runs, ".log")));
  EXPECT_OK(psctl.Start());
  absl::StatusOr<int> code = psctl.Wait(absl::Seconds(60));
  EXPECT_OK(code);
  return StatusRun{code.ok() ? *code : -1, psctl.Output()};
}

// Runs psctl status until its output matches every regex (the job got
// there).
StatusRun StatusOnceItShows(ManualCluster& cluster,
                            const std::vector<std::string>& regexes) {
  const absl::Time give_up = absl::Now() + absl::Minutes(3);
  StatusRun run;
  auto matches = [&run](const std::string& regex) {
    return ::testing::Matches(ContainsRegex(regex))(run.output);
  };
  while (absl::Now() < give_up) {
    run = PsctlStatus(cluster);
    if (std::all_of(regexes.begin(), regexes.end(), matches)) return run;
    absl::SleepFor(absl::Milliseconds(300));
  }
  ADD_FAILURE() << "psctl status never showed /"
                << absl::StrJoin(regexes, "/ and /") << "/; last output:\n"
                << run.output;
  return run;
}

TEST(StatusTest, EveryPhaseOfAJob) {
  // Sync: no step is taken until both workers are in, so the training
  // phase lasts until the test has seen it, however fast the machine.
  const std::string job = WriteTestFile("job.json", TestJob("SYNC", 2000));
  ManualCluster cluster(job, TempPath("ckpt"));
  cluster.Start("ps", 0);
  cluster.Start("ps", 1);
  cluster.Start("chief", 0);
  cluster.Start("worker", 0);

  // Start-up: worker 1 and the evaluator are missing; worker 1's port
  // does not answer. Missing tasks are expected while starting: healthy.
  StatusRun starting =
      StatusOnceItShows(cluster, {"chief: waiting for every worker to join",
                                  "missing: worker-1, evaluator-0"});
  EXPECT_EQ(starting.exit_code, 0) << starting.output;
  EXPECT_THAT(starting.output,
              AllOf(HasSubstr("missing: worker-1, evaluator-0"),
                    ContainsRegex("ps-0 +127.0.0.1:[0-9]+ +SERVING"),
                    ContainsRegex("worker-1 .*MISSING +never .*its port does "
                                  "not answer"),
                    HasSubstr("(starting up)"), HasSubstr("\nhealthy\n")))
      << starting.output;

  // Training: every worker trains; once the chief has sampled the servers
  // twice, they show rates, memory and stale drops.
  cluster.Start("worker", 1);
  const std::string server_stats =
      "ps-1 +127.0.0.1:[0-9]+ +SERVING +[a-z0-9 ]+ "
      "+[0-9.]+(B|KiB|MiB|GiB)/s +[0-9.]+MiB +0 ";
  // Every worker joined (worker 0 may still be preparing when worker 1
  // already trains, on a loaded machine): wait for the chief to say so.
  StatusRun training =
      StatusOnceItShows(cluster, {"worker-1 +127.0.0.1:[0-9]+ +TRAINING",
                                  server_stats, "chief: supervising training"});
  EXPECT_EQ(training.exit_code, 0) << training.output;
  EXPECT_THAT(
      training.output,
      AllOf(ContainsRegex("job test \\(SYNC\\): TRAINING"),
            HasSubstr("chief: supervising training"),
            HasSubstr("missing: evaluator-0"), Not(HasSubstr("(starting up)"))))
      << training.output;

  // Training over, the evaluator still missing: the chief waits for the
  // final evaluation, the workers have finished.
  StatusRun final_wait = StatusOnceItShows(
      cluster, {"chief: waiting for the evaluator's final evaluation"});
  EXPECT_EQ(final_wait.exit_code, 0) << final_wait.output;
  EXPECT_THAT(final_wait.output, AllOf(HasSubstr("FINAL_EVALUATION"),
                                       ContainsRegex("evaluator-0 .*MISSING")))
      << final_wait.output;

  // The evaluator ends the job; then nothing answers.
  cluster.Start("evaluator", 0);
  EXPECT_THAT(cluster.Latest("chief0")->Wait(absl::Minutes(3)),
              IsOkAndHolds(0));
  for (const char* task : {"worker0", "worker1", "ps0", "ps1", "evaluator0"}) {
    EXPECT_THAT(cluster.Latest(task)->Wait(absl::Minutes(1)), IsOkAndHolds(0))
        << task;
  }
  StatusRun over = PsctlStatus(cluster);
  EXPECT_EQ(over.exit_code, 1) << over.output;
  EXPECT_THAT(over.output, HasSubstr("the job is not running")) << over.output;

  // A stray task that has not exited is named.
  cluster.Start("ps", 0);
  StatusRun stray = StatusOnceItShows(cluster, {"not exited\\): ps-0"});
  EXPECT_EQ(stray.exit_code, 1) << stray.output;
  EXPECT_THAT(stray.output, ContainsRegex("ps-0 +127.0.0.1:[0-9]+ +answers"))
      << stray.output;
}

}  // namespace
}  // namespace psflow
