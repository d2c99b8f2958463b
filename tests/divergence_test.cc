// A job whose learning rate makes it diverge, through `psctl local` as the
// README shows, in every mode and for each kind of model: it must fail
// within a few steps with the cause named, and every process must exit by
// itself (no signal, no sanitizer report). A mistyped rate of 1e30 once
// killed the workers with heap corruption instead (a prefetching pull
// landed in a buffer freed on the error path), and a bounded-staleness job
// stalled for a minute on the refused steps.
//
// The same test runs with sanitizer-built role binaries:
// bazel test --config=asan //tests:divergence_test (tools/sanitizers.sh).
#include <regex>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/local_run.h"
#include "tests/test_paths.h"

namespace psflow {
namespace {

using ::psflow::testing::kFashionMnist;
using ::psflow::testing::LocalRun;
using ::psflow::testing::RunLocal;
using ::psflow::testing::TempPath;
using ::psflow::testing::TestJob;
using ::psflow::testing::WriteTestFile;
using ::testing::HasSubstr;
using ::testing::Not;

// The rate of the issue's report: finite, but every update overflows.
constexpr char kHugeRate[] = "1e30";
// As the job's error message prints it.
constexpr char kHugeRatePrinted[] = "1e+30";

// Checks what every diverged job must show: FAILED with the cause named,
// and no task that died of a signal or a sanitizer report.
void ExpectCleanDivergence(const LocalRun& run) {
  EXPECT_EQ(run.exit_code, 1) << run.output;
  ASSERT_OK_AND_ASSIGN(JsonValue result, run.Result());
  const JsonValue* state = result.Find("state");
  ASSERT_NE(state, nullptr) << run.output;
  EXPECT_EQ(state->string_value(), "FAILED");
  const JsonValue* message = result.Find("message");
  ASSERT_NE(message, nullptr) << run.output;
  EXPECT_THAT(message->string_value(), HasSubstr("the updates are not finite"));
  EXPECT_THAT(message->string_value(),
              HasSubstr(absl::StrCat("the learning rate ", kHugeRatePrinted)));
  // psctl names each task that failed with its exit code; a signal shows
  // as 128 + its number, and psctl names kills and stragglers.
  static const std::regex kSignalled(R"(\(exit (1[2-9][0-9]|2[0-5][0-9])\))");
  EXPECT_FALSE(std::regex_search(run.output, kSignalled)) << run.output;
  EXPECT_THAT(run.output, Not(HasSubstr("was killed")));
  EXPECT_THAT(run.output, Not(HasSubstr("did not exit in time")));
  EXPECT_THAT(run.output, Not(HasSubstr("AddressSanitizer")));
  EXPECT_THAT(run.output, Not(HasSubstr("runtime error")));
}

// BOUNDED mode's extra training setting.
std::string StalenessFor(const std::string& mode) {
  return mode == "BOUNDED" ? R"(, "max_staleness": 2)" : "";
}

// TestJob's MLP with Adam at the huge rate (the default job's optimizer).
std::string DivergingMlp(const std::string& mode,
                         const std::string& training_extra = "") {
  std::string job =
      TestJob(mode, 100000, "", 64,
              std::string(kFashionMnist) + "train-images-idx3-ubyte.gz",
              training_extra);
  const std::string rate = R"("learning_rate": 0.002)";
  EXPECT_NE(job.find(rate), std::string::npos);
  return absl::StrReplaceAll(
      job, {{rate, absl::StrCat(R"("learning_rate": )", kHugeRate)}});
}

class DivergingMlpTest : public ::testing::TestWithParam<const char*> {};

TEST_P(DivergingMlpTest, FailsWithTheCauseAndEveryProcessExits) {
  const std::string mode = GetParam();
  const std::string job = WriteTestFile(
      absl::StrCat("mlp_", mode, ".json"),
      DivergingMlp(
          mode, mode == std::string("BOUNDED") ? R"("max_staleness": 2)" : ""));
  // As the README starts the default job: TLS and tokens on.
  ExpectCleanDivergence(
      RunLocal(job, {"--ps=1", "--workers=2", "--evaluator"}));
}

INSTANTIATE_TEST_SUITE_P(EveryMode, DivergingMlpTest,
                         ::testing::Values("ASYNC", "SYNC", "BOUNDED"));

class DivergingModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DivergingModelTest, AConvnetWithBatchNormalizationFailsWithTheCause) {
  const std::string mode = GetParam();
  const std::string data = kFashionMnist;
  const std::string job = absl::StrCat(R"({
    "name": "diverging_convnet",
    "model": {"layers": [
      {"Rescaling": {"scale": 0.00392156862745098}},
      {"Conv2D": {"filters": 4, "kernel_size": [3], "strides": [2]}},
      {"BatchNormalization": {}},
      {"ReLU": {}},
      {"MaxPooling2D": {"pool_size": [2]}},
      {"Flatten": {}},
      {"Dense": {"units": 10}}]},
    "optimizer": {"kind": "SGD"},
    "learning_rate": {"learning_rate": )",
                                       kHugeRate, R"(},
    "data": {"train_images": ")",
                                       data, R"(train-images-idx3-ubyte.gz",
             "train_labels": ")",
                                       data, R"(train-labels-idx1-ubyte.gz",
             "test_images": ")",
                                       data, R"(t10k-images-idx3-ubyte.gz",
             "test_labels": ")",
                                       data, R"(t10k-labels-idx1-ubyte.gz",
             "num_classes": 10},
    "training": {"batch_size": 32, "steps": 100000, "mode": ")",
                                       mode, "\"", StalenessFor(mode), R"(},
    "evaluation": {"every_secs": 2, "batch_size": 1000}
  })");
  ExpectCleanDivergence(
      RunLocal(WriteTestFile("convnet_" + mode + ".json", job),
               {"--ps=1", "--workers=2", "--evaluator", "--tls=false",
                "--tokens=false"}));
}

TEST_P(DivergingModelTest, AClickThroughRateModelFailsWithTheCause) {
  const std::string mode = GetParam();
  const std::string data = TempPath("ctr_data_" + mode);
  const std::string job = absl::StrCat(R"({
    "name": "diverging_ctr",
    "model": {"wide_deep": {"embedding_dim": 4, "hidden_sizes": [16]}},
    "optimizer": {"kind": "SGD"},
    "learning_rate": {"learning_rate": )",
                                       kHugeRate, R"(},
    "data": {"format": "CRITEO",
             "train_path": ")",
                                       data, R"(/train.txt",
             "test_path": ")",
                                       data, R"(/test.txt",
             "num_dense": 4, "num_fields": 6,
             "synthesize": {"train_examples": 5000, "test_examples": 1000,
                            "vocabulary": 500}},
    "training": {"batch_size": 64, "epochs": 50, "mode": ")",
                                       mode, "\"", StalenessFor(mode), R"(},
    "evaluation": {"every_secs": 2, "batch_size": 1000}
  })");
  ExpectCleanDivergence(RunLocal(WriteTestFile("ctr_" + mode + ".json", job),
                                 {"--ps=2", "--workers=2", "--evaluator",
                                  "--tls=false", "--tokens=false"}));
}

INSTANTIATE_TEST_SUITE_P(EveryMode, DivergingModelTest,
                         ::testing::Values("ASYNC", "SYNC", "BOUNDED"));

}  // namespace
}  // namespace psflow
