// Click-through-rate jobs end to end through `psctl local`: the data
// generated on first use from a planted model, a wide-and-deep model whose
// embedding tables live on two parameter servers, the evaluator's AUC and
// log loss, and a checkpoint that holds and verifies the tables; and a
// DLRM-shaped `model.graph` learning through its shared table.
#include <string>

#include "absl/strings/str_cat.h"
#include "checkpoint/state_file.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/local_run.h"
#include "tests/test_paths.h"

namespace psflow {
namespace {

using ::psflow::testing::Command;
using ::psflow::testing::LocalRun;
using ::psflow::testing::Psctl;
using ::psflow::testing::RunLocal;
using ::psflow::testing::TempPath;
using ::psflow::testing::WriteTestFile;
using ::testing::HasSubstr;

std::string CtrJob(const std::string& data_dir, const std::string& mode) {
  return absl::StrCat(R"({
    "name": "ctr",
    "model": {"wide_deep": {"embedding_dim": 8, "hidden_sizes": [32],
              "linear": {"initializer": {"kind": "ZEROS"}}}},
    "optimizer": {"kind": "ADAGRAD"},
    "learning_rate": {"learning_rate": 0.05},
    "data": {"format": "CRITEO",
             "train_path": ")",
                      data_dir, R"(/train.txt",
             "test_path": ")",
                      data_dir, R"(/test.txt",
             "num_dense": 4, "num_fields": 6,
             "synthesize": {"train_examples": 20000, "test_examples": 5000,
                            "vocabulary": 2000, "weight_scale": 0.5}},
    "training": {"batch_size": 128, "epochs": 2, "mode": ")",
                      mode, R"(", "seed": 2},
    "logging": {"log_every_steps": 100},
    "evaluation": {"every_secs": 5, "batch_size": 2048}
  })");
}

TEST(CtrTest, AWideAndDeepJobLearnsThroughItsTables) {
  const std::string data = TempPath("ctr_data");
  const std::string checkpoints = TempPath("ctr_ckpts");
  for (const char* mode : {"ASYNC", "SYNC"}) {
    SCOPED_TRACE(mode);
    LocalRun run = RunLocal(
        WriteTestFile(absl::StrCat("ctr_", mode, ".json"), CtrJob(data, mode)),
        {"--ps=2", "--workers=2", "--evaluator", "--tls=false",
         "--tokens=false", "--checkpoint_dir=" + checkpoints + "/" + mode});
    ASSERT_EQ(run.exit_code, 0) << run.output;
    ASSERT_OK_AND_ASSIGN(JsonValue result, run.Result());
    const JsonValue* auc = result.Find("test_auc");
    ASSERT_NE(auc, nullptr) << run.output;
    // Chance is 0.5; the planted model's own AUC is printed when the data
    // is generated (about 0.85 at this weight scale).
    EXPECT_GT(auc->number_value(), 0.65) << run.output;
    EXPECT_LT(result.Find("test_loss")->number_value(), 0.69) << run.output;

    // The final checkpoint holds both tables, and they verify.
    absl::StatusOr<std::optional<std::string>> latest =
        LatestCheckpoint(checkpoints + "/" + mode);
    ASSERT_TRUE(latest.ok() && latest->has_value());
    Command inspect = Psctl({"ckpt", "inspect", **latest});
    EXPECT_THAT(inspect.output, HasSubstr("embedding "));
    EXPECT_THAT(inspect.output, HasSubstr("linear "));
    EXPECT_THAT(inspect.output, HasSubstr("table    dim 8"));
    Command verify = Psctl({"ckpt", "verify", **latest});
    EXPECT_EQ(verify.exit_code, 0) << verify.output;
    EXPECT_THAT(verify.output, HasSubstr("and 2 embedding tables"));
  }
  // The first run generated the data; the second found it.
  EXPECT_TRUE(Psctl({"data", "synth-ctr", "--out_dir=" + data}).exit_code != 0)
      << "an existing data set is not overwritten without --overwrite";
}

// DLRM's shape on 4 dense and 6 categorical columns: a bottom MLP, the
// pairwise dot products of its output and the six fields' embeddings, a
// top MLP.
std::string DlrmJob(const std::string& data_dir) {
  std::string inputs, fields, tables;
  for (const char* table : {"emb", "C3", "C4", "C5"}) {
    absl::StrAppend(&tables, tables.empty() ? "" : ", ", R"({"name": ")", table,
                    R"(", "initializer": {"kind": "UNIFORM", "scale": 0.05}})");
  }
  for (int f = 0; f < 6; ++f) {
    // Fields 0 to 2 share table "emb"; 3 to 5 have a table each (named
    // after the input), which holds rows of its own field's ids only.
    absl::StrAppend(&inputs, R"(, {"name": "C)", f, R"(", "categorical": )",
                    R"({"field": )", f, f < 3 ? R"(, "table": "emb")" : "",
                    R"(, "dim": 8}})");
    absl::StrAppend(&fields, R"(, "C)", f, R"(")");
  }
  return absl::StrCat(R"({
    "name": "dlrm",
    "model": {"graph": {
      "inputs": [{"name": "dense", "features": {}})",
                      inputs, R"(],
      "tables": [)",
                      tables, R"(],
      "nodes": [
        {"name": "bottom", "inputs": ["dense"],
         "layer": {"Dense": {"units": 8, "activation": "relu"}}},
        {"name": "interaction", "inputs": ["bottom")",
                      fields, R"(],
         "layer": {"DotInteraction": {}}},
        {"name": "top_input", "inputs": ["bottom", "interaction"],
         "layer": {"Concatenate": {}}},
        {"name": "top", "inputs": ["top_input"],
         "layer": {"Dense": {"units": 32, "activation": "relu"}}},
        {"name": "logit", "inputs": ["top"], "layer": {"Dense": {"units": 1}}}
      ],
      "output": {"node": "logit", "loss": "SIGMOID_CROSS_ENTROPY"}}},
    "optimizer": {"kind": "ADAGRAD"},
    "learning_rate": {"learning_rate": 0.05},
    "data": {"format": "CRITEO",
             "train_path": ")",
                      data_dir, R"(/train.txt",
             "test_path": ")",
                      data_dir, R"(/test.txt",
             "num_dense": 4, "num_fields": 6,
             "synthesize": {"train_examples": 20000, "test_examples": 5000,
                            "vocabulary": 2000, "weight_scale": 0.5}},
    "training": {"batch_size": 128, "epochs": 2, "mode": "ASYNC", "seed": 2},
    "logging": {"log_every_steps": 100},
    "evaluation": {"every_secs": 5, "batch_size": 2048}
  })");
}

TEST(CtrTest, ADlrmGraphJobLearnsThroughSharedAndOwnTables) {
  const std::string checkpoints = TempPath("dlrm_ckpts");
  LocalRun run =
      RunLocal(WriteTestFile("dlrm.json", DlrmJob(TempPath("dlrm_data"))),
               {"--ps=2", "--workers=2", "--evaluator", "--tls=false",
                "--tokens=false", "--checkpoint_dir=" + checkpoints});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_OK_AND_ASSIGN(JsonValue result, run.Result());
  const JsonValue* auc = result.Find("test_auc");
  ASSERT_NE(auc, nullptr) << run.output;
  EXPECT_GT(auc->number_value(), 0.65) << run.output;
  absl::StatusOr<std::optional<std::string>> latest =
      LatestCheckpoint(checkpoints);
  ASSERT_TRUE(latest.ok() && latest->has_value());
  Command inspect = Psctl({"ckpt", "inspect", **latest});
  EXPECT_THAT(inspect.output, HasSubstr("bottom/kernel"));
  EXPECT_THAT(inspect.output, HasSubstr("top/kernel"));
  EXPECT_THAT(inspect.output, HasSubstr("emb "));
  EXPECT_THAT(inspect.output, HasSubstr("C5 "));
  EXPECT_THAT(inspect.output, HasSubstr("table    dim 8"));
}

}  // namespace
}  // namespace psflow
