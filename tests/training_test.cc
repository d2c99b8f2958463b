// Whole jobs on 127.0.0.1 through `psctl local` and the role binaries:
// real processes, real Fashion-MNIST data, bounded time.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "client/health_check.h"
#include "common/free_port.h"
#include "common/json.h"
#include "common/metrics/event_file_test_util.h"
#include "common/status_matchers.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/local_run.h"
#include "tests/test_paths.h"

namespace psflow {
namespace {

using ::psflow::testing::kFashionMnist;
using ::psflow::testing::LocalRun;
using ::psflow::testing::RunfilePath;
using ::psflow::testing::RunLocal;
using ::psflow::testing::ScalarTagsIn;
using ::psflow::testing::TempPath;
using ::psflow::testing::TestAccuracy;
using ::psflow::testing::TestJob;
using ::psflow::testing::WriteTestFile;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;
using ::testing::Not;

// The event files (events.out.tfevents.*) in `dir`, with their sizes.
std::vector<std::pair<std::string, int64_t>> EventFiles(
    const std::string& dir) {
  std::vector<std::pair<std::string, int64_t>> files;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.rfind("events.out.tfevents.", 0) != 0) continue;
      struct stat st;
      stat((dir + "/" + name).c_str(), &st);
      files.emplace_back(name, st.st_size);
    }
    closedir(d);
  }
  return files;
}

TEST(TrainingTest, AsyncJobWithWorkerZeroAsChiefLearns) {
  LocalRun run = RunLocal(WriteTestFile("async.json", TestJob("ASYNC", 2000)),
                          {"--ps=2", "--workers=2"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_GE(TestAccuracy(run), 0.80) << run.output;
  EXPECT_THAT(run.output, HasSubstr("[worker-0]"));
  EXPECT_THAT(run.output, HasSubstr("[ps-1]"));
  EXPECT_THAT(run.output, HasSubstr("this worker also runs the chief's"));
  EXPECT_THAT(run.output, HasSubstr("job SUCCEEDED"));
  // One host: tensors go through shared memory.
  EXPECT_THAT(run.output, HasSubstr("bulk data with ps-1 at 127.0.0.1:"));
  EXPECT_THAT(run.output, HasSubstr("goes through shared memory"));
  EXPECT_THAT(run.output, Not(HasSubstr("stays on TCP")));
  // TensorBoard event files, one directory per task: every process's
  // system metrics in a run of their own (<task>/system: stepped by
  // seconds, not by global step), and the training view where it belongs
  // (the chief's directory is worker 0's chief duties, not a process of
  // its own).
  for (const char* task :
       {"ps-0", "ps-1", "worker-0", "worker-1", "evaluator-0"}) {
    const std::string dir = run.dir + "/logs/test/" + task;
    EXPECT_EQ(EventFiles(dir + "/system").size(), 1u) << task;
    EXPECT_THAT(
        ScalarTagsIn(dir + "/system"),
        IsSupersetOf({"system/resident_memory_bytes", "system/threads"}))
        << task;
    for (const std::string& tag : ScalarTagsIn(dir)) {
      EXPECT_NE(tag.rfind("system/", 0), 0u) << tag << " in " << task;
    }
  }
  EXPECT_THAT(ScalarTagsIn(run.dir + "/logs/test/worker-0"),
              IsSupersetOf({"loss", "accuracy", "examples_per_sec"}));
  EXPECT_THAT(ScalarTagsIn(run.dir + "/logs/test/chief-0"),
              Contains("examples_per_sec"));
  EXPECT_THAT(ScalarTagsIn(run.dir + "/logs/test/evaluator-0"),
              Contains("accuracy"));
}

TEST(TrainingTest, SyncJobWithASeparateChiefLearns) {
  LocalRun run = RunLocal(WriteTestFile("sync.json", TestJob("SYNC", 400)),
                          {"--ps=1", "--workers=2", "--chief"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_GE(TestAccuracy(run), 0.80) << run.output;
  EXPECT_THAT(run.output, HasSubstr("[chief-0]"));
  // Every step averages both workers' gradients (replicas default to all).
  EXPECT_THAT(run.output, HasSubstr("mode SYNC (2 of 2 workers)"));
  // The chief as a process of its own logs its system metrics too.
  EXPECT_THAT(ScalarTagsIn(run.dir + "/logs/test/chief-0/system"),
              Contains("system/resident_memory_bytes"));
}

TEST(TrainingTest, BoundedStalenessJobWithAStragglerLearns) {
  // Worker 2 takes three times as long per step; with max_staleness 2 the
  // others wait for it, and the servers say how often.
  LocalRun run = RunLocal(
      WriteTestFile("bounded.json", TestJob("BOUNDED", 600, "", 64,
                                            std::string(kFashionMnist) +
                                                "train-images-idx3-ubyte.gz",
                                            R"("max_staleness": 2)")),
      {"--ps=2", "--workers=3", "--straggler=2:3"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_GE(TestAccuracy(run), 0.78) << run.output;
  EXPECT_THAT(run.output, HasSubstr("mode BOUNDED (max_staleness 2, 3 "
                                    "workers)"));
  EXPECT_THAT(run.output, HasSubstr("slowed down 3x (--slowdown)"));
  EXPECT_THAT(run.output, HasSubstr("pulls waited for a slower worker"));
}

TEST(TrainingTest, JobOverLoopbackTcpLearns) {
  // What a job across hosts does: servers refuse shared memory, so every
  // tensor byte crosses TCP.
  LocalRun run = RunLocal(WriteTestFile("tcp.json", TestJob("ASYNC", 1000)),
                          {"--ps=1", "--workers=2", "--shared_memory=false"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_GE(TestAccuracy(run), 0.80) << run.output;
  EXPECT_THAT(run.output,
              HasSubstr("stays on TCP: shared memory is disabled on this "
                        "server (--shared_memory=false)"));
  EXPECT_THAT(run.output, Not(HasSubstr("goes through shared memory")));
}

TEST(TrainingTest, InterruptStopsEveryProcess) {
  // Long enough that it is still training when interrupted.
  const std::string job = WriteTestFile("long.json", TestJob("ASYNC", 1000000));
  const std::string dir = TempPath("interrupted");
  Subprocess psctl({RunfilePath("client/psctl/psctl"), "local", "--job=" + job,
                    "--dir=" + dir, "--bin_dir=" + RunfilePath(""),
                    "--device=cpu", "--ps=1", "--workers=2"},
                   {}, TempPath("psctl.log"));
  ASSERT_OK(psctl.Start());
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (psctl.Output().find("joined; training") == std::string::npos) {
    ASSERT_LT(absl::Now(), deadline) << psctl.Output();
    absl::SleepFor(absl::Milliseconds(50));
  }
  psctl.Signal(SIGINT);
  const absl::Time interrupted = absl::Now();
  EXPECT_THAT(psctl.Wait(absl::Seconds(30)), IsOkAndHolds(128 + SIGINT));
  EXPECT_LT(absl::Now() - interrupted, absl::Seconds(15));
  const std::string output = psctl.Output();
  EXPECT_THAT(output, HasSubstr("psctl local: interrupted (SIGINT)"));
  EXPECT_THAT(output, ::testing::Not(HasSubstr("did not exit in time")));
  // The parameter server is gone too: its health check no longer answers.
  const size_t at = output.find("serving on 127.0.0.1:");
  ASSERT_NE(at, std::string::npos);
  const int port = std::atoi(output.c_str() + at + 21);
  EXPECT_THAT(CheckHealth(absl::StrCat("127.0.0.1:", port),
                          absl::Now() + absl::Seconds(2), TransportSecurity()),
              ::testing::Not(IsOk()));
}

// Test data that cannot serve the model fails the job before it trains,
// naming the file (it used to fail at the first evaluation, a minute in).
TEST(TrainingTest, TestDataThatCannotServeTheModelFailsTheJobAtStart) {
  const std::string data = kFashionMnist;
  // The test images cut short (a copy that stopped half way).
  const std::string truncated = TempPath("t10k-images-truncated-idx3-ubyte");
  {
    std::ifstream in(data + "t10k-images-idx3-ubyte.gz", std::ios::binary);
    std::stringstream whole;
    whole << in.rdbuf();
    const std::string bytes = whole.str();
    ASSERT_GT(bytes.size(), 1000u);
    std::ofstream(truncated + ".gz", std::ios::binary)
        << bytes.substr(0, bytes.size() / 2);
  }
  const struct {
    const char* what;
    std::string from, to, named;
  } cases[] = {
      {"labels of the training split", "t10k-labels-idx1-ubyte.gz",
       "train-labels-idx1-ubyte.gz", "train-labels-idx1-ubyte.gz"},
      {"a truncated images file", data + "t10k-images-idx3-ubyte.gz",
       truncated + ".gz", truncated},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string job =
        absl::StrReplaceAll(TestJob("ASYNC", 100000), {{c.from, c.to}});
    ASSERT_NE(job, TestJob("ASYNC", 100000));
    LocalRun run =
        RunLocal(WriteTestFile("bad_test_data.json", job), {"--evaluator"});
    EXPECT_EQ(run.exit_code, 1) << run.output;
    EXPECT_THAT(run.output, AllOf(HasSubstr("the test data cannot serve this "
                                            "job"),
                                  HasSubstr(c.named)));
    // Nobody trained.
    EXPECT_THAT(run.output, Not(HasSubstr("joined; training"))) << run.output;
  }
}

TEST(TrainingTest, BadJobConfigIsRefusedBeforeAnythingStarts) {
  std::string job = TestJob("ASYNC", 10);
  job =
      absl::StrReplaceAll(job, {{"\"batch_size\": 64", "\"batch_size\": -1"}});
  LocalRun run = RunLocal(WriteTestFile("bad.json", job), {});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr("training.batch_size is -1"));
}

// A model that cannot fit (300 convolutions grew a worker to 9.4 GB until
// the kernel killed it; at 256 filters each, its outputs and parameters
// take over 30 GiB a worker at batch 64) is refused before any process starts,
// with the estimate and its largest layers.
TEST(TrainingTest, AModelTooLargeForThisHostIsRefusedBeforeAnythingStarts) {
  std::string layers;
  for (int i = 0; i < 300; ++i) {
    absl::StrAppend(&layers, R"({"conv2d": {"filters": 256, "kernel_size": [3],
                                 "padding": "same", "activation": "relu"}},)");
  }
  std::string job = TestJob("ASYNC", 10);
  job = absl::StrReplaceAll(
      job, {{R"("mlp": {"hidden_sizes": [64]})",
             absl::StrCat(R"("layers": [)", layers,
                          R"({"flatten": {}}, {"dense": {"units": 10}}])")}});
  LocalRun run = RunLocal(WriteTestFile("huge.json", job), {"--workers=2"});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output,
              AllOf(HasSubstr("does not fit in memory"), HasSubstr("conv2d"),
                    HasSubstr("training.batch_size")));
  // Nothing was started: psctl writes the tasks' TF_CONFIGs first.
  EXPECT_THAT(run.output, ::testing::Not(HasSubstr("[worker-0]")));
  struct stat st;
  EXPECT_NE(stat((run.dir + "/tf_config").c_str(), &st), 0);
}

TEST(TrainingTest, MissingDataFileFailsTheJobWithTheFileNamed) {
  LocalRun run = RunLocal(
      WriteTestFile("missing.json",
                    TestJob("ASYNC", 10, "", 64, "/nonexistent/train.gz")),
      {"--workers=1", "--evaluator=false"});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_THAT(run.output, HasSubstr("/nonexistent/train.gz"));
  ASSERT_OK_AND_ASSIGN(JsonValue result, run.Result());
  EXPECT_EQ(result.Find("state")->string_value(), "FAILED");
  EXPECT_THAT(run.output, ::testing::Not(HasSubstr("did not exit in time")));
}

// Labels outside the classes the job declares fail the job at start with
// the file and record, instead of training a silently wider model.
TEST(TrainingTest, LabelsOutsideTheDeclaredClassesFailTheJob) {
  std::string job = TestJob("ASYNC", 10);
  // Fashion-MNIST has 10 classes; record 0 is class 9.
  job = absl::StrReplaceAll(
      job, {{"train-labels-idx1-ubyte.gz\",",
             "train-labels-idx1-ubyte.gz\", \"num_classes\": 9,"}});
  LocalRun run = RunLocal(WriteTestFile("classes.json", job),
                          {"--workers=1", "--evaluator=false"});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_THAT(run.output,
              HasSubstr("train-labels-idx1-ubyte.gz record 0 has label 9, "
                        "outside the job's 9 classes"));
  ASSERT_OK_AND_ASSIGN(JsonValue result, run.Result());
  EXPECT_EQ(result.Find("state")->string_value(), "FAILED");
}

TEST(TrainingTest, TruncatedDataFileFailsTheJobAsDataLoss) {
  std::ifstream in(std::string(kFashionMnist) + "train-images-idx3-ubyte.gz",
                   std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  const std::string cut =
      WriteTestFile("cut.gz", bytes.substr(0, bytes.size() / 3));
  LocalRun run =
      RunLocal(WriteTestFile("cut.json", TestJob("ASYNC", 10, "", 64, cut)),
               {"--workers=1", "--evaluator=false"});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_THAT(run.output, HasSubstr(cut));
}

// A chief whose worker never comes fails after its startup deadline and
// says which task at which address is missing.
TEST(TrainingTest, MissingWorkerFailsTheChiefAfterItsDeadline) {
  const std::string job = WriteTestFile("job.json", TestJob("ASYNC", 10));
  // The ps binds port 0 and reports it; the chief must know it.
  const std::string port_file = TempPath("ps.port");
  Subprocess ps(
      {RunfilePath("ps/ps_server"), "--allow_unauthenticated_callers",
       "--bind_host=127.0.0.1", "--port_file=" + port_file},
      {{"TF_CONFIG",
        R"({"cluster": {"ps": ["127.0.0.1:0"], "worker": ["127.0.0.1:1"]},
                      "task": {"type": "ps", "index": 0}})"}},
      TempPath("ps.log"));
  ASSERT_OK(ps.Start());
  ASSERT_OK_AND_ASSIGN(int ps_port,
                       WaitForPortFile(port_file, absl::Seconds(30)));
  const std::string chief_config = absl::StrCat(
      R"({"cluster": {"chief": ["127.0.0.1:0"], "ps": ["127.0.0.1:)", ps_port,
      R"("], "worker": ["127.0.0.1:1"]}, "task": {"type": "chief", "index": 0}})");
  Subprocess chief({RunfilePath("chief/chief"), "--job=" + job,
                    "--allow_unauthenticated_callers", "--bind_host=127.0.0.1",
                    "--startup_timeout_s=3"},
                   {{"TF_CONFIG", chief_config}}, TempPath("chief.log"));
  const absl::Time start = absl::Now();
  ASSERT_OK(chief.Start());
  EXPECT_THAT(chief.Wait(absl::Seconds(60)), IsOkAndHolds(1));
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  EXPECT_THAT(chief.Output(),
              HasSubstr("workers that never joined by the startup deadline "
                        "(3s): worker-0 at 127.0.0.1:1"));
  // The chief told the ps to stop on its way out.
  EXPECT_THAT(ps.Wait(absl::Seconds(15)), IsOkAndHolds(0)) << ps.Output();
}

TEST(TrainingTest, MissingParameterServerFailsTheChiefAfterItsDeadline) {
  const std::string job = WriteTestFile("job.json", TestJob("ASYNC", 10));
  // A free port nobody listens on (fixed low ports may be bound by a test
  // running beside this one).
  ASSERT_OK_AND_ASSIGN(int dead_port, PickFreePort());
  Subprocess chief(
      {RunfilePath("chief/chief"), "--job=" + job,
       "--allow_unauthenticated_callers", "--bind_host=127.0.0.1",
       "--startup_timeout_s=2"},
      {{"TF_CONFIG",
        absl::StrCat(
            R"({"cluster": {"chief": ["127.0.0.1:0"], "ps": ["127.0.0.1:)",
            dead_port, R"("], "worker": ["127.0.0.1:2"]},
            "task": {"type": "chief", "index": 0}})")}},
      TempPath("chief.log"));
  const absl::Time start = absl::Now();
  ASSERT_OK(chief.Start());
  EXPECT_THAT(chief.Wait(absl::Seconds(60)), IsOkAndHolds(1));
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  EXPECT_THAT(chief.Output(),
              HasSubstr(absl::StrCat("ps-0 at 127.0.0.1:", dead_port,
                                     " is not healthy")));
}

// A worker flag with a value it does not know stops the worker at once,
// naming the values it takes.
TEST(TrainingTest, AnUnknownBackgroundCallsValueIsRefused) {
  const std::string tf_config =
      R"({"cluster": {"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"],)"
      R"( "worker": ["127.0.0.1:3"]}, "task": {"type": "worker", "index": 0}})";
  Subprocess worker({RunfilePath("worker/worker"),
                     "--background_calls=sometimes", "--device=cpu"},
                    {{"TF_CONFIG", tf_config}}, TempPath("bad_flag.log"));
  ASSERT_OK(worker.Start());
  absl::StatusOr<int> exit_code = worker.Wait(absl::Seconds(30));
  ASSERT_OK(exit_code.status());
  EXPECT_NE(*exit_code, 0);
  EXPECT_THAT(worker.Output(),
              HasSubstr("--background_calls=sometimes is not auto, on or off"));
}

}  // namespace
}  // namespace psflow
