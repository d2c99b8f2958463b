// A job with many tasks through `psctl local`: PSFLOW_SCALE_WORKERS workers
// and PSFLOW_SCALE_PS parameter servers (tests/BUILD: 16x4 in CI, 64x16 as
// a soak test), all on this host, training a tiny async job to its end.
// Only the outcome is checked; how long the chief takes is
// bench/chief_scale.py's business.
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/json.h"
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
using ::psflow::testing::WriteTestFile;
using ::testing::HasSubstr;
using ::testing::Not;

int EnvInt(const char* name, int fallback) {
  const char* text = std::getenv(name);
  int value = 0;
  return text != nullptr && absl::SimpleAtoi(text, &value) ? value : fallback;
}

// An MLP with 16 hidden units, batch 32, async, no evaluation: each step
// is cheap, so the run is dominated by the tasks' start, coordination and
// exit, which is what grows with the job.
std::string TinyJob(int steps) {
  const std::string data = kFashionMnist;
  return absl::StrCat(R"({
    "name": "scale",
    "model": {"mlp": {"hidden_sizes": [16]}},
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
                      steps, R"(, "mode": "ASYNC", "seed": 3}
  })");
}

TEST(ScaleTest, JobWithManyTasksTrainsToItsEndAndEveryProcessExitsCleanly) {
  const int workers = EnvInt("PSFLOW_SCALE_WORKERS", 16);
  const int ps = EnvInt("PSFLOW_SCALE_PS", 4);
  const int steps = EnvInt("PSFLOW_SCALE_STEPS", 200);
  LocalRun run =
      RunLocal(WriteTestFile("scale.json", TinyJob(steps)),
               {absl::StrCat("--ps=", ps), absl::StrCat("--workers=", workers),
                "--chief", "--evaluator=false"});
  // psctl local exits 0 only when the job succeeded and every task it
  // started exited 0 on its own.
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("job SUCCEEDED"));
  EXPECT_THAT(run.output, HasSubstr(absl::StrCat("all ", workers,
                                                 " workers joined; training")));
  EXPECT_THAT(run.output, Not(HasSubstr("tasks that failed")));
  EXPECT_THAT(run.output, Not(HasSubstr("did not exit in time")));
  EXPECT_THAT(run.output, Not(HasSubstr("stopped reporting")));
  ASSERT_OK_AND_ASSIGN(JsonValue result, run.Result());
  ASSERT_NE(result.Find("state"), nullptr) << run.output;
  EXPECT_EQ(result.Find("state")->string_value(), "SUCCEEDED");
  ASSERT_NE(result.Find("global_step"), nullptr) << run.output;
  EXPECT_EQ(result.Find("total_steps")->number_value(), steps);
  // Async: a worker checks the global step its parameters came with
  // before each step it takes. Prefetched, those parameters were pulled
  // while its previous step computed, so a worker may push two steps
  // after another reached the total: the one it was computing and the
  // next, begun on the prefetched parameters (bench/RESULTS.md, "Chief at
  // scale"; worker/prefetch_policy.h).
  EXPECT_GE(result.Find("global_step")->number_value(), steps);
  EXPECT_LE(result.Find("global_step")->number_value(), steps + 2 * workers);
}

}  // namespace
}  // namespace psflow
