// The evaluator rides out what the workers ride out: a parameter server
// killed and restarted while the evaluator is about to pull the live
// model. The evaluator's pulls meet the restarted, not yet configured
// server; it skips that round, waits while the chief restores the server
// from a checkpoint, and evaluates again once training resumes, through to
// the final evaluation. Real processes (tests/manual_cluster.h) on free
// ports, a click-through-rate job (its evaluator always pulls the live
// model).
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_matchers.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/local_run.h"
#include "tests/manual_cluster.h"
#include "tests/test_paths.h"

namespace psflow {
namespace {

using ::psflow::testing::Command;
using ::psflow::testing::ManualCluster;
using ::psflow::testing::Psctl;
using ::psflow::testing::TempPath;
using ::psflow::testing::WriteTestFile;
using ::testing::HasSubstr;

// Waits until `process` has printed `text`.
void WaitForOutput(Subprocess* process, const std::string& text) {
  const absl::Time deadline = absl::Now() + absl::Seconds(180);
  while (absl::Now() < deadline) {
    if (process->Output().find(text) != std::string::npos) return;
    absl::SleepFor(absl::Milliseconds(50));
  }
  FAIL() << "no \"" << text << "\" in:\n" << process->Output();
}

TEST(EvaluatorRecoveryTest, AnEvaluatorRidesOutARestartedParameterServer) {
  const std::string data = TempPath("evaluator_recovery_data");
  Command synth = Psctl({"data", "synth-ctr", "--out_dir=" + data,
                         "--train_examples=20000", "--test_examples=2000",
                         "--fields=6", "--dense=4", "--vocabulary=2000"});
  ASSERT_EQ(synth.exit_code, 0) << synth.output;
  const std::string job = WriteTestFile(
      "evaluator_recovery.json",
      absl::StrCat(R"({
    "name": "evaluator_recovery",
    "model": {"wide_deep": {"embedding_dim": 8, "hidden_sizes": [32]}},
    "optimizer": {"kind": "ADAGRAD"},
    "learning_rate": {"learning_rate": 0.05},
    "data": {"format": "CRITEO", "train_path": ")",
                   data, R"(/train.txt", "test_path": ")", data,
                   R"(/test.txt", "num_dense": 4, "num_fields": 6},
    "training": {"batch_size": 128, "epochs": 6, "mode": "ASYNC"},
    "checkpoint": {"save_every_steps": 200},
    "logging": {"log_every_steps": 100},
    "evaluation": {"every_secs": 1, "batch_size": 1000}
  })"));
  const std::string checkpoints = TempPath("evaluator_recovery_ckpts");
  ManualCluster cluster(job, checkpoints, {"--ps_return_timeout_s=60"});
  // The evaluator stops before its second live evaluation's pulls, and
  // the chief holds the restarted server unconfigured for a while: the
  // evaluator's pulls meet it in that state every time.
  cluster.SetEnv("evaluator",
                 {{"PSFLOW_FAULT_POINTS", "evaluator.evaluate_live=3s@2"}});
  cluster.SetEnv("chief", {{"PSFLOW_FAULT_POINTS", "chief.restore_server=5s"}});
  cluster.StartAll();
  Subprocess* evaluator = cluster.Latest("evaluator0");
  WaitForOutput(evaluator, "fault point evaluator.evaluate_live");
  cluster.KillAndRestart("ps", 1, absl::Seconds(1));

  Subprocess* chief = cluster.Latest("chief0");
  EXPECT_THAT(chief->Wait(absl::Seconds(300)), IsOkAndHolds(0))
      << chief->Output();
  EXPECT_THAT(evaluator->Wait(absl::Seconds(60)), IsOkAndHolds(0))
      << evaluator->Output();
  const std::string out = evaluator->Output();
  const size_t skipped = out.find("evaluation skipped");
  ASSERT_NE(skipped, std::string::npos) << out;
  const size_t restored = out.find("the chief restored the model", skipped);
  ASSERT_NE(restored, std::string::npos) << out;
  // It evaluated again after the restore, and gave the final evaluation.
  EXPECT_NE(out.find("test AUC", restored), std::string::npos) << out;
  EXPECT_THAT(chief->Output(), HasSubstr("resuming at global step"));
  EXPECT_THAT(chief->Output(), HasSubstr("final evaluation at step"));
  EXPECT_THAT(chief->Output(), HasSubstr("by evaluator-0"));
}

}  // namespace
}  // namespace psflow
