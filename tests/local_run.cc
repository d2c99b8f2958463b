#include "tests/local_run.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status_matchers.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "tests/test_paths.h"

namespace psflow::testing {

std::string TestJob(const std::string& mode, int steps,
                    const std::string& extra, int hidden,
                    const std::string& train_images,
                    const std::string& training_extra) {
  const std::string data = kFashionMnist;
  return absl::StrCat(R"({
    "name": "test",
    "model": {"mlp": {"hidden_sizes": [)",
                      hidden, R"(]}},
    "optimizer": {"kind": "ADAM"},
    "learning_rate": {"kind": "COSINE_DECAY", "learning_rate": 0.002,
                      "decay_steps": )",
                      steps, R"(, "alpha": 0.05},
    "data": {"train_images": ")",
                      train_images, R"(",
             "train_labels": ")",
                      data, R"(train-labels-idx1-ubyte.gz",
             "test_images": ")",
                      data, R"(t10k-images-idx3-ubyte.gz",
             "test_labels": ")",
                      data, R"(t10k-labels-idx1-ubyte.gz"},
    "training": {"batch_size": 64, "steps": )",
                      steps, R"(, "mode": ")", mode, R"(", "seed": 3)",
                      training_extra.empty() ? "" : ", ", training_extra,
                      R"(},
    "logging": {"log_every_steps": 1000},
    "evaluation": {"every_secs": 2, "batch_size": 2000})",
                      extra.empty() ? "" : ",\n    ", extra, "\n  }");
}

std::string WriteTestFile(const std::string& name, const std::string& text) {
  const std::string path = TempPath(name);
  std::ofstream(path) << text;
  return path;
}

absl::StatusOr<JsonValue> LocalRun::Result() const {
  std::ifstream in(dir + "/result.json");
  std::stringstream text;
  text << in.rdbuf();
  return ParseJson(text.str());
}

std::vector<std::string> LocalArgv(const std::string& job_path,
                                   const std::string& dir,
                                   std::vector<std::string> flags) {
  std::vector<std::string> argv = {
      RunfilePath("client/psctl/psctl"), "local", "--job=" + job_path,
      "--dir=" + dir, "--bin_dir=" + RunfilePath(""), "--device=cpu",
      // Gives up on a job that stopped moving,
      // however slow the machine is.
      "--stall_timeout_s=300"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return argv;
}

LocalRun RunLocal(const std::string& job_path, std::vector<std::string> flags) {
  LocalRun run;
  run.dir = TempPath("local");
  const std::string log = TempPath("psctl.log");
  Subprocess psctl(LocalArgv(job_path, run.dir, std::move(flags)), {}, log);
  EXPECT_OK(psctl.Start());
  // Only a bound on a hung psctl: the stall timeout above ends stuck jobs,
  // and Bazel's own timeout for large tests (15 minutes) is longer.
  absl::StatusOr<int> code = psctl.Wait(absl::Minutes(14));
  run.output = psctl.Output();
  run.exit_code = code.ok() ? *code : -1;
  return run;
}

Command RunCommand(std::vector<std::string> argv) {
  Subprocess process(std::move(argv), {}, TempPath("command.log"));
  EXPECT_OK(process.Start());
  absl::StatusOr<int> code = process.Wait(absl::Seconds(60));
  return Command{code.ok() ? *code : -1, process.Output()};
}

Command Psctl(std::vector<std::string> args) {
  args.insert(args.begin(), RunfilePath("client/psctl/psctl"));
  return RunCommand(std::move(args));
}

double TestAccuracy(const LocalRun& run) {
  absl::StatusOr<JsonValue> result = run.Result();
  EXPECT_OK(result) << run.output;
  if (!result.ok()) return 0;
  const JsonValue* accuracy = result->Find("test_accuracy");
  EXPECT_NE(accuracy, nullptr) << run.output;
  return accuracy == nullptr ? 0 : accuracy->number_value();
}

}  // namespace psflow::testing
