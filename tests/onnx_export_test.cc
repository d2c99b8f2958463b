// `psctl ckpt export --format=onnx` end to end: small jobs trained with
// `psctl local`, their final checkpoints exported as ONNX, each export
// passed by ONNX's own checker (Debian's python3-onnx) and run by an
// independent runtime (ONNX Runtime for Node.js, which tools/setup.sh
// installs under ~/.cache/psflow/onnxruntime) on inputs in the exported
// model's format, with probabilities within 1e-4 of psflow's own model on
// the same inputs (tests/onnx_reference.h) and the same predicted classes.
//
// Where python3-onnx, node or the pinned onnxruntime-node are missing, the
// jobs, the exports and psflow's side still run; the checks print SKIPPED
// naming what is missing.
#include <pwd.h>
#include <unistd.h>

#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/state_file.h"
#include "common/file_util.h"
#include "common/status_matchers.h"
#include "data/dataset.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "proto/job_config.pb.h"
#include "tests/local_run.h"
#include "tests/onnx_reference.h"
#include "tests/test_paths.h"

namespace psflow {
namespace {

using ::psflow::testing::Command;
using ::psflow::testing::CtrReference;
using ::psflow::testing::CtrTextReference;
using ::psflow::testing::ImageReference;
using ::psflow::testing::kFashionMnist;
using ::psflow::testing::LocalRun;
using ::psflow::testing::Psctl;
using ::psflow::testing::RunCommand;
using ::psflow::testing::RunfilePath;
using ::psflow::testing::RunLocal;
using ::psflow::testing::TempPath;
using ::psflow::testing::WriteTestFile;
using ::testing::AllOf;
using ::testing::HasSubstr;

// The tolerance the issue sets for the exported model's predictions.
constexpr char kTolerance[] = "1e-4";

// The checkers' installs: node_modules of the pinned onnxruntime-node, or
// why they cannot run.
struct Checkers {
  std::string node_modules;
  std::string missing;  // empty: both checks run
};

Checkers FindCheckers() {
  Checkers c;
  if (RunCommand({"/usr/bin/python3", "-c", "import onnx"}).exit_code != 0) {
    c.missing = "python3-onnx is not installed";
    return c;
  }
  if (RunCommand({"/usr/bin/env", "node", "--version"}).exit_code != 0) {
    c.missing = "node is not installed";
    return c;
  }
  // The passwd entry's home, as tools/setup.sh uses: Bazel gives tests
  // another $HOME.
  const passwd* user = getpwuid(getuid());
  const std::string dir =
      absl::StrCat(user != nullptr ? user->pw_dir : "/nonexistent",
                   "/.cache/psflow/onnxruntime");
  absl::StatusOr<std::string> installed =
      ReadFileToString(dir + "/installed-package-lock.json");
  absl::StatusOr<std::string> pinned =
      ReadFileToString(RunfilePath("tests/onnx_check/package-lock.json"));
  if (!installed.ok() || !pinned.ok() || *installed != *pinned) {
    c.missing = absl::StrCat("onnxruntime-node is not installed in ", dir,
                             " as tests/onnx_check/package-lock.json pins it");
    return c;
  }
  c.node_modules = dir + "/node_modules";
  return c;
}

// The newest checkpoint the state file of `dir` names.
std::string Newest(const std::string& dir) {
  absl::StatusOr<std::optional<std::string>> latest = LatestCheckpoint(dir);
  EXPECT_TRUE(latest.ok() && latest->has_value()) << dir;
  return latest.ok() && latest->has_value() ? **latest : "";
}

// Exports `checkpoint` as <name>.onnx; returns its path.
std::string ExportOnnx(const std::string& checkpoint, const std::string& name) {
  const std::string onnx = TempPath(name + ".onnx");
  Command exported =
      Psctl({"ckpt", "export", checkpoint, "--format=onnx", "--out=" + onnx});
  EXPECT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_THAT(exported.output, HasSubstr("model from the checkpoint"));
  return onnx;
}

// ONNX's checker and ONNX Runtime against psflow's `reference` (JSON),
// fed the reference's inputs or, when given, those of `inputs_json`.
void ExpectRunsAsInPsflow(const Checkers& checkers, const std::string& onnx,
                          const std::string& reference,
                          const std::string& expected_inputs,
                          const std::string& inputs_json = "") {
  Command checked =
      RunCommand({"/usr/bin/python3",
                  RunfilePath("tests/onnx_check/check_onnx.py"), onnx});
  EXPECT_EQ(checked.exit_code, 0) << checked.output;
  EXPECT_THAT(checked.output, HasSubstr("check_onnx: OK"));
  EXPECT_THAT(checked.output, HasSubstr(expected_inputs));
  const std::string reference_path = WriteTestFile(
      absl::StrCat(onnx.substr(onnx.rfind('/') + 1), ".reference.json"),
      reference);
  std::vector<std::string> argv = {"/usr/bin/env",
                                   "node",
                                   RunfilePath("tests/onnx_check/run_onnx.js"),
                                   checkers.node_modules,
                                   onnx,
                                   reference_path,
                                   kTolerance};
  if (!inputs_json.empty()) {
    argv.push_back(WriteTestFile(
        absl::StrCat(onnx.substr(onnx.rfind('/') + 1), ".inputs.json"),
        inputs_json));
  }
  Command ran = RunCommand(argv);
  EXPECT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_THAT(ran.output, HasSubstr("max_abs_diff="));
  std::cout << onnx << ": ONNX Runtime against psflow: " << ran.output;
}

std::string ImageJob(const std::string& name, const std::string& model,
                     int steps) {
  const std::string data = kFashionMnist;
  return absl::StrCat(R"({"name": ")", name, R"(", "model": )", model, R"(,
    "optimizer": {"kind": "ADAM"},
    "learning_rate": {"kind": "CONSTANT", "learning_rate": 0.002},
    "data": {"train_images": ")",
                      data, R"(train-images-idx3-ubyte.gz",
             "train_labels": ")",
                      data, R"(train-labels-idx1-ubyte.gz",
             "test_images": ")",
                      data, R"(t10k-images-idx3-ubyte.gz",
             "test_labels": ")",
                      data, R"(t10k-labels-idx1-ubyte.gz"},
    "training": {"batch_size": 32, "steps": )",
                      steps, R"(, "mode": "ASYNC", "seed": 5},
    "logging": {"log_every_steps": 1000},
    "evaluation": {"every_secs": 60, "batch_size": 2000}})");
}

// Trains `job` on one server and one worker; returns the final checkpoint.
std::string Train(const std::string& name, const std::string& job) {
  const std::string checkpoints = TempPath(name + "_ckpts");
  LocalRun run = RunLocal(WriteTestFile(name + ".json", job),
                          {"--ps=1", "--workers=1", "--evaluator=false",
                           "--checkpoint_dir=" + checkpoints});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  return Newest(checkpoints);
}

absl::StatusOr<Dataset> TestImages() {
  return LoadIdxDataset(
      absl::StrCat(kFashionMnist, "t10k-images-idx3-ubyte.gz"),
      absl::StrCat(kFashionMnist, "t10k-labels-idx1-ubyte.gz"));
}

// A shipped job config (configs/<name>.json), shortened for a test:
// `steps` steps instead of its epochs, no checkpoint schedule of its own
// (the test names the directory), and for CRITEO jobs a small generated
// data set in `ctr_data`.
std::string ShippedJob(const std::string& name, int steps,
                       const std::string& ctr_data = "") {
  absl::StatusOr<std::string> text =
      ReadFileToString(RunfilePath("configs/" + name + ".json"));
  EXPECT_OK(text);
  JobConfig job;
  EXPECT_TRUE(
      google::protobuf::util::JsonStringToMessage(text.value_or("{}"), &job)
          .ok())
      << name;
  job.mutable_training()->set_steps(steps);
  job.clear_checkpoint();
  job.mutable_evaluation()->set_every_secs(60);
  if (job.data().format() == DataConfig::CRITEO) {
    DataConfig& data = *job.mutable_data();
    data.set_train_path(ctr_data + "/train.txt");
    data.set_test_path(ctr_data + "/test.txt");
    data.mutable_synthesize()->set_train_examples(4000);
    data.mutable_synthesize()->set_test_examples(500);
    data.mutable_synthesize()->set_vocabulary(20000);
  }
  std::string json;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(job, &json).ok());
  return json;
}

TEST(OnnxExportTest, TheDefaultMlpJobRunsInOnnxRuntimeAsInPsflow) {
  const std::string checkpoint =
      Train("mlp", ShippedJob("fashion_mnist_mlp", 300));
  ASSERT_FALSE(checkpoint.empty());
  const std::string onnx = ExportOnnx(checkpoint, "mlp");
  ASSERT_OK_AND_ASSIGN(Dataset images, TestImages());
  ASSERT_OK_AND_ASSIGN(std::string reference,
                       ImageReference(checkpoint, images, 500));
  const Checkers checkers = FindCheckers();
  if (!checkers.missing.empty()) {
    GTEST_SKIP() << "SKIPPED: the ONNX checks: " << checkers.missing
                 << " (tools/setup.sh installs it)";
  }
  // Raw pixel values in; the 1/255 the reader applied is inside.
  ExpectRunsAsInPsflow(checkers, onnx, reference,
                       "input pixels float [batch, 28, 28]");
}

TEST(OnnxExportTest, AConvolutionalLayersModelRunsAsInPsflow) {
  const std::string model = R"({"layers": [
      {"Rescaling": {"scale": 0.00392156862745098}},
      {"Conv2D": {"filters": 4, "kernel_size": [3], "padding": "same",
                  "activation": "relu"}},
      {"BatchNormalization": {}},
      {"MaxPooling2D": {}},
      {"Conv2D": {"filters": 6, "kernel_size": [3, 2], "strides": [2],
                  "activation": "tanh", "use_bias": false}},
      {"AveragePooling2D": {"pool_size": [3], "strides": [2],
                            "padding": "same"}},
      {"Dropout": {"rate": 0.2}},
      {"Flatten": {}},
      {"Dense": {"units": 16, "activation": "sigmoid"}},
      {"ReLU": {}},
      {"Dense": {"units": 10}}]})";
  const std::string checkpoint =
      Train("convnet", ImageJob("convnet", model, 150));
  ASSERT_FALSE(checkpoint.empty());
  const std::string onnx = ExportOnnx(checkpoint, "convnet");
  // The same model without its batch normalization: every other layer's
  // variables match the checkpoint, but the export would not be the
  // trained model, so it is refused, naming what the config lacks.
  std::string without_norm = model;
  const std::string norm = R"({"BatchNormalization": {}},)";
  without_norm.erase(without_norm.find(norm), norm.size());
  const Command mismatched =
      Psctl({"ckpt", "export", checkpoint, "--format=onnx",
             "--out=" + TempPath("convnet_without_norm.onnx"),
             "--job=" + WriteTestFile("convnet_without_norm.json",
                                      ImageJob("convnet", without_norm, 150))});
  EXPECT_NE(mismatched.exit_code, 0) << mismatched.output;
  EXPECT_THAT(mismatched.output, AllOf(HasSubstr("batch_normalization"),
                                       HasSubstr("which the model lacks")));
  ASSERT_OK_AND_ASSIGN(Dataset images, TestImages());
  ASSERT_OK_AND_ASSIGN(std::string reference,
                       ImageReference(checkpoint, images, 200));
  const Checkers checkers = FindCheckers();
  if (!checkers.missing.empty()) {
    GTEST_SKIP() << "SKIPPED: the ONNX checks: " << checkers.missing
                 << " (tools/setup.sh installs it)";
  }
  ExpectRunsAsInPsflow(checkers, onnx, reference,
                       "input pixels float [batch, 28, 28]");
}

// A graph on images: its features input keeps its name, raw pixel values
// in; two branches (global average pooling, flattening) added.
TEST(OnnxExportTest, AGraphOnImagesRunsAsInPsflow) {
  const std::string model = R"({"graph": {
      "inputs": [{"name": "image", "features": {}}],
      "nodes": [
        {"name": "scaled", "inputs": ["image"],
         "layer": {"Rescaling": {"scale": 0.00392156862745098, "offset": -0.5}}},
        {"name": "conv", "inputs": ["scaled"],
         "layer": {"Conv2D": {"filters": 8, "kernel_size": [5], "strides": [2],
                              "padding": "same", "activation": "relu"}}},
        {"name": "pooled", "inputs": ["conv"],
         "layer": {"GlobalAveragePooling2D": {}}},
        {"name": "from_pooled", "inputs": ["pooled"],
         "layer": {"Dense": {"units": 10}}},
        {"name": "flat", "inputs": ["conv"], "layer": {"Flatten": {}}},
        {"name": "from_flat", "inputs": ["flat"],
         "layer": {"Dense": {"units": 10, "use_bias": false}}},
        {"name": "logits", "inputs": ["from_pooled", "from_flat"],
         "layer": {"Add": {}}}],
      "output": {"node": "logits", "loss": "SOFTMAX_CROSS_ENTROPY"}}})";
  const std::string checkpoint =
      Train("image_graph", ImageJob("image_graph", model, 150));
  ASSERT_FALSE(checkpoint.empty());
  const std::string onnx = ExportOnnx(checkpoint, "image_graph");
  ASSERT_OK_AND_ASSIGN(Dataset images, TestImages());
  ASSERT_OK_AND_ASSIGN(std::string reference,
                       ImageReference(checkpoint, images, 200));
  const Checkers checkers = FindCheckers();
  if (!checkers.missing.empty()) {
    GTEST_SKIP() << "SKIPPED: the ONNX checks: " << checkers.missing
                 << " (tools/setup.sh installs it)";
  }
  ExpectRunsAsInPsflow(checkers, onnx, reference,
                       "input image float [batch, 28, 28]");
}

// A click-through-rate graph with every multi-input layer, two tables (one
// shared by five fields, sum and mean pooling), batch normalization's
// moving statistics and the dense transform; the ids of unseen values and
// empty bags included.
std::string CtrJob(const std::string& data_dir) {
  std::string inputs, fields, wide;
  for (int f = 0; f < 5; ++f) {
    absl::StrAppend(&inputs, R"(, {"name": "C)", f,
                    R"(", "categorical": {"field": )", f,
                    R"(, "table": "emb", "dim": 4)",
                    f == 4 ? R"(, "pooling": "mean")" : "", "}}");
    absl::StrAppend(&inputs, R"(, {"name": "W)", f,
                    R"(", "categorical": {"field": )", f,
                    R"(, "table": "linear", "dim": 1}})");
    absl::StrAppend(&fields, f == 0 ? "" : ", ", R"("C)", f, R"(")");
    absl::StrAppend(&wide, f == 0 ? "" : ", ", R"("W)", f, R"(")");
  }
  return absl::StrCat(R"({
    "name": "ctr_onnx",
    "model": {"graph": {
      "inputs": [{"name": "dense", "features": {}})",
                      inputs, R"(],
      "tables": [{"name": "emb", "initializer": {"kind": "UNIFORM",
                                                 "scale": 0.05}}],
      "nodes": [
        {"name": "normalized", "inputs": ["dense"],
         "layer": {"BatchNormalization": {"momentum": 0.9}}},
        {"name": "bottom", "inputs": ["normalized"],
         "layer": {"Dense": {"units": 4, "activation": "relu"}}},
        {"name": "interaction", "inputs": ["bottom", )",
                      fields, R"(],
         "layer": {"DotInteraction": {"self_interaction": true}}},
        {"name": "pair", "inputs": ["C0", "C1"], "layer": {"Multiply": {}}},
        {"name": "stacked", "inputs": [)",
                      fields, R"(], "layer": {"Concatenate": {}}},
        {"name": "fields", "inputs": ["stacked"],
         "layer": {"Reshape": {"target_shape": [5, -1]}}},
        {"name": "fm", "inputs": ["fields"],
         "layer": {"FactorizationMachine": {}}},
        {"name": "x0", "inputs": ["bottom", "interaction", "pair"],
         "layer": {"Concatenate": {}}},
        {"name": "cross_0", "inputs": ["x0"],
         "layer": {"Cross": {"projection_dim": 3}}},
        {"name": "cross_1", "inputs": ["x0", "cross_0"], "layer": {"Cross": {}}},
        {"name": "top", "inputs": ["cross_1"],
         "layer": {"Dense": {"units": 8, "activation": "relu"}}},
        {"name": "dropped", "inputs": ["top"], "layer": {"Dropout": {"rate": 0.1}}},
        {"name": "deep", "inputs": ["dropped"], "layer": {"Dense": {"units": 1}}},
        {"name": "logit", "inputs": ["deep", "fm", )",
                      wide, R"(], "layer": {"Add": {}}}
      ],
      "output": {"node": "logit", "loss": "SIGMOID_CROSS_ENTROPY"}}},
    "optimizer": {"kind": "ADAGRAD"},
    "learning_rate": {"learning_rate": 0.05},
    "data": {"format": "CRITEO",
             "train_path": ")",
                      data_dir, R"(/train.txt",
             "test_path": ")",
                      data_dir, R"(/test.txt",
             "num_dense": 3, "num_fields": 6,
             "synthesize": {"train_examples": 6000, "test_examples": 1000,
                            "vocabulary": 500, "weight_scale": 0.5}},
    "training": {"batch_size": 64, "epochs": 1, "mode": "ASYNC", "seed": 2},
    "logging": {"log_every_steps": 1000},
    "evaluation": {"every_secs": 60, "batch_size": 1000}
  })");
}

TEST(OnnxExportTest, AClickThroughRateGraphWithTablesRunsAsInPsflow) {
  const std::string data = TempPath("ctr_data");
  const std::string checkpoint = Train("ctr", CtrJob(data));
  ASSERT_FALSE(checkpoint.empty());
  const std::string onnx = ExportOnnx(checkpoint, "ctr");
  ASSERT_OK_AND_ASSIGN(std::string reference,
                       CtrReference(checkpoint, 300, /*seed=*/7));
  const Checkers checkers = FindCheckers();
  if (!checkers.missing.empty()) {
    GTEST_SKIP() << "SKIPPED: the ONNX checks: " << checkers.missing
                 << " (tools/setup.sh installs it)";
  }
  // Raw integer columns and -1-padded bags of ids per field.
  ExpectRunsAsInPsflow(checkers, onnx, reference,
                       "input ids int64 [batch, 6, bag]");

  // Held-out Criteo lines as stored: psflow's reader on one side, the
  // shipped hashing (tools/ctr_feature_id.py) and the model on the other.
  ASSERT_OK_AND_ASSIGN(std::string test_lines,
                       ReadFileToString(data + "/test.txt", 64 << 20));
  test_lines = test_lines.substr(0, test_lines.find('\n', 20000) + 1);
  ASSERT_OK_AND_ASSIGN(std::string text_reference,
                       CtrTextReference(checkpoint, test_lines));
  const std::string lines_path = WriteTestFile("ctr_lines.txt", test_lines);
  Command hashed = RunCommand(
      {"/bin/sh", "-c",
       absl::StrCat("/usr/bin/python3 ", RunfilePath("tools/ctr_feature_id.py"),
                    " --num_dense=3 --num_fields=6 < ", lines_path)});
  ASSERT_EQ(hashed.exit_code, 0) << hashed.output;
  ExpectRunsAsInPsflow(checkers, onnx, text_reference,
                       "input dense int64 [batch, 3]", hashed.output);
}

// The recommendation zoo (docs/models.md) and the model.wide_deep kind's
// config, each shortened to 60 steps on a
// small generated data set they share: generated examples with seen and
// unseen ids, and held-out Criteo lines hashed by tools/ctr_feature_id.py.
class ZooExportTest : public ::testing::TestWithParam<const char*> {};

std::string ZooData() {
  static const std::string* const dir = new std::string(TempPath("zoo_data"));
  return *dir;
}

TEST_P(ZooExportTest, RunsInOnnxRuntimeAsInPsflow) {
  const std::string name = GetParam();
  const std::string checkpoint = Train(name, ShippedJob(name, 60, ZooData()));
  ASSERT_FALSE(checkpoint.empty());
  const std::string onnx = ExportOnnx(checkpoint, name);
  ASSERT_OK_AND_ASSIGN(std::string reference,
                       CtrReference(checkpoint, 200, /*seed=*/11));
  ASSERT_OK_AND_ASSIGN(std::string test_lines,
                       ReadFileToString(ZooData() + "/test.txt", 64 << 20));
  test_lines = test_lines.substr(0, test_lines.find('\n', 30000) + 1);
  ASSERT_OK_AND_ASSIGN(std::string text_reference,
                       CtrTextReference(checkpoint, test_lines));
  const Checkers checkers = FindCheckers();
  if (!checkers.missing.empty()) {
    GTEST_SKIP() << "SKIPPED: the ONNX checks: " << checkers.missing
                 << " (tools/setup.sh installs it)";
  }
  ExpectRunsAsInPsflow(checkers, onnx, reference,
                       "input ids int64 [batch, 26, bag]");
  const std::string lines_path = WriteTestFile(name + "_lines.txt", test_lines);
  Command hashed = RunCommand(
      {"/bin/sh", "-c",
       absl::StrCat("/usr/bin/python3 ", RunfilePath("tools/ctr_feature_id.py"),
                    " < ", lines_path)});
  ASSERT_EQ(hashed.exit_code, 0) << hashed.output;
  ExpectRunsAsInPsflow(checkers, onnx, text_reference,
                       "input dense int64 [batch, 13]", hashed.output);
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooExportTest,
                         ::testing::Values("ctr_dlrm", "ctr_dcn_v2",
                                           "ctr_deepfm", "ctr_wide_deep_graph",
                                           "ctr_wide_deep"));

}  // namespace
}  // namespace psflow
