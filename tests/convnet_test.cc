// A convolutional network (the Keras guide's, on real Fashion-MNIST) as a
// whole job through `psctl local`: it learns in async and sync modes, its
// batch normalization statistics are updated on the parameter servers, and
// its checkpoint resumes on another number of servers.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "checkpoint/state_file.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/local_run.h"
#include "tests/test_paths.h"

namespace psflow {
namespace {

using ::psflow::testing::Command;
using ::psflow::testing::kFashionMnist;
using ::psflow::testing::LocalRun;
using ::psflow::testing::Psctl;
using ::psflow::testing::RunLocal;
using ::psflow::testing::TempPath;
using ::psflow::testing::TestAccuracy;
using ::psflow::testing::WriteTestFile;
using ::testing::HasSubstr;
using ::testing::Not;

// configs/fashion_mnist_convnet.json's model with a short schedule: the rate
// decays to 0 and the moving statistics follow the last 10 steps (momentum
// 0.9, not 0.99), so that the model the evaluator sees has settled.
std::string ConvnetJob(const std::string& mode, int steps,
                       const std::string& extra = "") {
  const std::string data = kFashionMnist;
  return absl::StrCat(R"({
    "name": "test",
    "model": {"layers": [
      {"Rescaling": {"scale": 0.00392156862745098}},
      {"Conv2D": {"filters": 12, "kernel_size": [3], "padding": "same",
                  "use_bias": false}},
      {"BatchNormalization": {"center": true, "scale": false,
                              "momentum": 0.9}},
      {"ReLU": {}},
      {"Conv2D": {"filters": 24, "kernel_size": [6], "strides": [2],
                  "use_bias": false}},
      {"BatchNormalization": {"center": true, "scale": false,
                              "momentum": 0.9}},
      {"ReLU": {}},
      {"Conv2D": {"filters": 32, "kernel_size": [6], "strides": [2],
                  "padding": "same"}},
      {"BatchNormalization": {"center": true, "scale": false,
                              "momentum": 0.9}},
      {"ReLU": {}},
      {"GlobalAveragePooling2D": {}},
      {"Dense": {"units": 256, "activation": "relu"}},
      {"Dropout": {"rate": 0.5}},
      {"Dense": {"units": 10}}]},
    "optimizer": {"kind": "ADAM"},
    "learning_rate": {"kind": "COSINE_DECAY", "learning_rate": 0.002,
                      "decay_steps": )",
                      steps, R"(, "alpha": 0.0},
    "data": {"train_images": ")",
                      data, R"(train-images-idx3-ubyte.gz",
             "train_labels": ")",
                      data, R"(train-labels-idx1-ubyte.gz",
             "test_images": ")",
                      data, R"(t10k-images-idx3-ubyte.gz",
             "test_labels": ")",
                      data, R"(t10k-labels-idx1-ubyte.gz",
             "num_classes": 10},
    "training": {"batch_size": 32, "steps": )",
                      steps, R"(, "mode": ")", mode, R"(", "seed": 5},
    "logging": {"log_every_steps": 100},
    "evaluation": {"every_secs": 5, "batch_size": 1000})",
                      extra.empty() ? "" : ",\n    ", extra, "\n  }");
}

// The values `psctl ckpt inspect --values` prints for one tensor.
std::vector<double> TensorValues(const std::string& checkpoint,
                                 const std::string& tensor) {
  Command inspect =
      Psctl({"ckpt", "inspect", checkpoint, "--tensor=" + tensor, "--values"});
  EXPECT_EQ(inspect.exit_code, 0) << inspect.output;
  std::vector<double> values;
  const size_t open = inspect.output.find('[', inspect.output.find('\n'));
  const size_t close = inspect.output.find(']', open);
  if (open == std::string::npos || close == std::string::npos) return values;
  for (absl::string_view v : absl::StrSplit(
           inspect.output.substr(open + 1, close - open - 1), ", ")) {
    double x;
    if (absl::SimpleAtod(v, &x)) values.push_back(x);
  }
  return values;
}

TEST(ConvnetTest, AsyncJobLearnsAndKeepsMovingStatisticsOnTheServers) {
  const std::string dir = TempPath("async_ckpts");
  LocalRun run = RunLocal(WriteTestFile("async.json", ConvnetJob("ASYNC", 400)),
                          {"--ps=1", "--workers=2", "--tls=false",
                           "--tokens=false", "--checkpoint_dir=" + dir});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // Chance is 0.10; 400 steps of 32 examples reach about 0.75.
  EXPECT_GE(TestAccuracy(run), 0.55) << run.output;
  ASSERT_OK_AND_ASSIGN(JsonValue result, run.Result());
  EXPECT_LT(result.Find("test_loss")->number_value(),
            1.5);  // from ln(10) = 2.3
  EXPECT_THAT(run.output, HasSubstr("layers 28x28 -> 14 layers -> 10 "
                                    "classes"));

  // Keras' names; moving statistics without optimizer slots, moved away
  // from their initial ones by the servers' moving averages.
  absl::StatusOr<std::optional<std::string>> latest = LatestCheckpoint(dir);
  ASSERT_TRUE(latest.ok() && latest->has_value()) << dir;
  const std::string newest = **latest;
  Command inspect = Psctl({"ckpt", "inspect", newest});
  EXPECT_THAT(inspect.output, HasSubstr("conv2d_1/kernel "));
  EXPECT_THAT(inspect.output, HasSubstr("batch_normalization_2/moving_mean"));
  EXPECT_THAT(inspect.output, Not(HasSubstr("moving_mean@")));
  const std::vector<double> variance =
      TensorValues(newest, "batch_normalization/moving_variance");
  ASSERT_EQ(variance.size(), 12u) << inspect.output;
  for (double v : variance) {
    EXPECT_GT(v, 0.0);
    EXPECT_LT(v, 0.9);  // started at 1; the data's variance is far lower
  }
}

TEST(ConvnetTest, SyncJobResumesOnAnotherNumberOfServers) {
  const std::string dir = TempPath("sync_ckpts");
  const std::string checkpoints = R"("checkpoint": {"save_every_steps": 100})";
  LocalRun first = RunLocal(
      WriteTestFile("first.json", ConvnetJob("SYNC", 150, checkpoints)),
      {"--ps=2", "--workers=2", "--checkpoint_dir=" + dir});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  ASSERT_OK_AND_ASSIGN(JsonValue result, first.Result());
  const int64_t saved_step =
      result.Find("final_checkpoint_step")->number_value();

  LocalRun second = RunLocal(
      WriteTestFile("second.json", ConvnetJob("SYNC", 300, checkpoints)),
      {"--ps=1", "--workers=2", "--checkpoint_dir=" + dir});
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_THAT(second.output,
              HasSubstr(absl::StrCat("resuming at global step ", saved_step)));
  EXPECT_GE(TestAccuracy(second), 0.55) << second.output;
}

}  // namespace
}  // namespace psflow
