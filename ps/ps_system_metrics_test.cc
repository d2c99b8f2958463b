#include "ps/ps_system_metrics.h"

#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "absl/time/clock.h"
#include "common/metrics/event_file_test_util.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"

namespace psflow {
namespace {

using ::psflow::testing::ScalarTagsIn;
using ::testing::Contains;

ConfigureRequest Configuration(const std::string& log_dir) {
  ConfigureRequest request;
  request.set_protocol_version(kProtocolVersion);
  request.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
  request.mutable_learning_rate()->set_learning_rate(0.1);
  request.set_mode(ASYNC);
  request.set_num_workers(1);
  request.set_job_name("demo");
  request.set_log_dir(log_dir);
  return request;
}

std::string TestDir(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

TEST(PsSystemMetricsTest, TheEventFileGoesWhereTheChiefSays) {
  ParameterServerCore core{ParameterServerCore::Options()};
  PsSystemMetrics metrics(&core, 3, /*logdir_flag=*/"");
  ASSERT_OK(core.Configure(Configuration(TestDir("job_logs"))));
  const std::string dir = TestDir("job_logs") + "/demo/ps-3/system";
  // The first sample is written at once: wait for it, not for a time.
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (!ScalarTagsIn(dir).count("system/threads") && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_THAT(ScalarTagsIn(dir), Contains("system/resident_memory_bytes"));
}

TEST(PsSystemMetricsTest, ARunGroupIsAFolderAboveTheJobs) {
  ParameterServerCore core{ParameterServerCore::Options()};
  PsSystemMetrics metrics(&core, 0, /*logdir_flag=*/"");
  ConfigureRequest request = Configuration(TestDir("group_logs"));
  request.set_run_group("sweep");
  ASSERT_OK(core.Configure(request));
  const std::string dir = TestDir("group_logs") + "/sweep/demo/ps-0/system";
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (!ScalarTagsIn(dir).count("system/threads") && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_THAT(ScalarTagsIn(dir), Contains("system/threads"));
}

TEST(PsSystemMetricsTest, ARunGroupThatWouldBeAPathIsRefused) {
  ParameterServerCore core{ParameterServerCore::Options()};
  ConfigureRequest request = Configuration(TestDir("refused_logs"));
  request.set_run_group("../escape");
  EXPECT_THAT(core.Configure(request),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::HasSubstr("the run group")));
}

TEST(PsSystemMetricsTest, TheFlagOverridesTheJobsDirectory) {
  ParameterServerCore core{ParameterServerCore::Options()};
  PsSystemMetrics metrics(&core, 0, TestDir("flag_logs"));
  ASSERT_OK(core.Configure(Configuration(TestDir("ignored"))));
  const std::string dir = TestDir("flag_logs") + "/demo/ps-0/system";
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (!ScalarTagsIn(dir).count("system/threads") && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_THAT(ScalarTagsIn(dir), Contains("system/threads"));
  struct stat st;
  EXPECT_NE(stat(TestDir("ignored").c_str(), &st), 0);
}

// A benchmark or tool configures servers without a log_dir: nothing is
// written (not into the server's working directory).
TEST(PsSystemMetricsTest, NoLogDirMeansNoEventFile) {
  const std::string cwd_logs = "logs";
  {
    ParameterServerCore core{ParameterServerCore::Options()};
    PsSystemMetrics metrics(&core, 0, "");
    ASSERT_OK(core.Configure(Configuration("")));
    absl::SleepFor(absl::Milliseconds(500));  // room for a wrong write
  }
  struct stat st;
  EXPECT_NE(stat(cwd_logs.c_str(), &st), 0);
}

// Destroyed before any Configure: it stops at once.
TEST(PsSystemMetricsTest, StopsBeforeConfiguration) {
  ParameterServerCore core{ParameterServerCore::Options()};
  PsSystemMetrics metrics(&core, 0, TestDir("never"));
}

}  // namespace
}  // namespace psflow
