// The evaluator rides out what the workers ride out: a parameter server
// killed and restarted while it pulls the live model, during training and
// after it. The evaluator's pulls meet the restarted, not yet configured
// server; it skips that round, waits while the chief restores the server
// from a checkpoint (during training the newest, after training the final
// one, which holds the model as trained), and evaluates again, through to
// the final evaluation. Real processes (tests/manual_cluster.h) on free
// ports, a click-through-rate job (its evaluator always pulls the live
// model). Fault points (common/fault_point.h) hold the job in the phase
// the kill is meant for, so the kill lands there however fast the job
// trains.
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
using ::testing::Not;

// Waits until `process` has printed `text`.
void WaitForOutput(Subprocess* process, const std::string& text) {
  const absl::Time deadline = absl::Now() + absl::Seconds(180);
  while (absl::Now() < deadline) {
    if (process->Output().find(text) != std::string::npos) return;
    absl::SleepFor(absl::Milliseconds(50));
  }
  FAIL() << "no \"" << text << "\" in:\n" << process->Output();
}

// The job both tests run: 6 epochs of 20,000 generated examples.
std::string CtrJob() {
  const std::string data = TempPath("evaluator_recovery_data");
  Command synth = Psctl({"data", "synth-ctr", "--out_dir=" + data,
                         "--train_examples=20000", "--test_examples=2000",
                         "--fields=6", "--dense=4", "--vocabulary=2000"});
  EXPECT_EQ(synth.exit_code, 0) << synth.output;
  return WriteTestFile(
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
}

TEST(EvaluatorRecoveryTest, AnEvaluatorRidesOutAServerRestartedInTraining) {
  const std::string job = CtrJob();
  const std::string checkpoints = TempPath("evaluator_recovery_ckpts");
  ManualCluster cluster(job, checkpoints, {"--ps_return_timeout_s=60"});
  // The workers stop for 5 s at their 50th step: training cannot end
  // before the kill. The chief holds the restarted server unconfigured for
  // a while: the evaluator's pulls (every second) meet it in that state.
  cluster.SetEnv("worker",
                 {{"PSFLOW_FAULT_POINTS", "worker.train_step=5s@50"}});
  cluster.SetEnv("chief", {{"PSFLOW_FAULT_POINTS", "chief.restore_server=5s"}});
  cluster.StartAll();
  WaitForOutput(cluster.Latest("worker0"), "fault point worker.train_step");
  cluster.KillAndRestart("ps", 1, absl::Seconds(1));

  Subprocess* chief = cluster.Latest("chief0");
  Subprocess* evaluator = cluster.Latest("evaluator0");
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
  EXPECT_THAT(chief->Output(), Not(HasSubstr("after training ended")));
  EXPECT_THAT(chief->Output(), HasSubstr("final evaluation at step"));
  EXPECT_THAT(chief->Output(), HasSubstr("by evaluator-0"));
}

// Training is over and the final checkpoint saved when the server goes:
// the chief restores the final checkpoint while it waits for the final
// evaluation, and the evaluator evaluates the restored model.
TEST(EvaluatorRecoveryTest,
     AServerRestartedAfterTrainingGetsTheFinalModelBack) {
  const std::string job = CtrJob();
  const std::string checkpoints = TempPath("evaluator_recovery_final_ckpts");
  ManualCluster cluster(job, checkpoints, {"--ps_return_timeout_s=60"});
  // The chief stops for 10 s before it asks for the final evaluation.
  cluster.SetEnv("chief",
                 {{"PSFLOW_FAULT_POINTS", "chief.final_evaluation=10s"}});
  cluster.StartAll();
  Subprocess* chief = cluster.Latest("chief0");
  WaitForOutput(chief, "fault point chief.final_evaluation");
  cluster.KillAndRestart("ps", 1, absl::Seconds(1));

  Subprocess* evaluator = cluster.Latest("evaluator0");
  EXPECT_THAT(chief->Wait(absl::Seconds(300)), IsOkAndHolds(0))
      << chief->Output();
  EXPECT_THAT(evaluator->Wait(absl::Seconds(60)), IsOkAndHolds(0))
      << evaluator->Output();
  const std::string chief_out = chief->Output();
  EXPECT_THAT(chief_out, HasSubstr("parameter server lost after training "
                                   "ended"));
  const size_t restored = chief_out.find("restored ");
  ASSERT_NE(restored, std::string::npos) << chief_out;
  EXPECT_NE(chief_out.find("final evaluation at step", restored),
            std::string::npos)
      << chief_out;
  EXPECT_THAT(chief_out, HasSubstr("by evaluator-0"));
  const std::string out = evaluator->Output();
  const size_t model_restored = out.find("the chief restored the model");
  ASSERT_NE(model_restored, std::string::npos) << out;
  EXPECT_NE(out.find("final evaluation, step", model_restored),
            std::string::npos)
      << out;
  // The finished workers trained nothing again (they may or may not have
  // seen the restore: it can be over between two of their reports).
  Subprocess* worker0 = cluster.Latest("worker0");
  EXPECT_THAT(worker0->Wait(absl::Seconds(60)), IsOkAndHolds(0));
  EXPECT_THAT(worker0->Output(),
              Not(HasSubstr("training the steps since again")));
}

}  // namespace
}  // namespace psflow
