// Shared by the whole-job tests: small job configs on the real
// Fashion-MNIST files and running them through `psctl local`.
#ifndef PSFLOW_TESTS_LOCAL_RUN_H_
#define PSFLOW_TESTS_LOCAL_RUN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/json.h"

namespace psflow::testing {

inline constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist/";

// A small job: `steps` global steps of an MLP with `hidden` units, in
// `mode`. The rate decays over the job so that the final accuracy does not
// depend on where async noise leaves the last step. `extra` is inserted
// as more top-level fields, e.g. R"("checkpoint": {...})";
// `training_extra` as more fields of "training", e.g. R"("max_staleness": 2)".
std::string TestJob(
    const std::string& mode, int steps, const std::string& extra = "",
    int hidden = 64,
    const std::string& train_images = std::string(kFashionMnist) +
                                      "train-images-idx3-ubyte.gz",
    const std::string& training_extra = "");

// Writes `text` to a fresh file under the test's temporary directory.
std::string WriteTestFile(const std::string& name, const std::string& text);

struct LocalRun {
  int exit_code = -1;
  std::string output;
  std::string dir;
  absl::StatusOr<JsonValue> Result() const;
};

// `psctl local --job=<job_path> --device=cpu <flags>` to its end.
LocalRun RunLocal(const std::string& job_path, std::vector<std::string> flags);

// The argv of that run, for tests that start it themselves.
std::vector<std::string> LocalArgv(const std::string& job_path,
                                   const std::string& dir,
                                   std::vector<std::string> flags);

// result.json's test_accuracy (a test failure and 0 when missing).
double TestAccuracy(const LocalRun& run);

// A short command run to its end (at most a minute): its exit code (-1
// when it could not run or outlasted the minute) and output.
struct Command {
  int exit_code = -1;
  std::string output;
};
Command RunCommand(std::vector<std::string> argv);
// `psctl <args>`.
Command Psctl(std::vector<std::string> args);

}  // namespace psflow::testing

#endif  // PSFLOW_TESTS_LOCAL_RUN_H_
