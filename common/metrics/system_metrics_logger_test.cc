#include "common/metrics/system_metrics_logger.h"

#include <cstdlib>
#include <memory>

#include "common/metrics/event_file_test_util.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::psflow::testing::ReadEvents;
using ::psflow::testing::ScalarTagsIn;
using ::testing::Contains;
using ::testing::IsSupersetOf;
using ::testing::Not;

std::string FreshDir(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

TEST(SystemMetricsLoggerTest, LevelsAtOnceAndRatesFromTheSecondSample) {
  const std::string dir = FreshDir("levels");
  ASSERT_OK_AND_ASSIGN(auto writer, EventFileWriter::Create(dir));
  SystemMetricsLogger::Options options;
  options.start_thread = false;
  SystemMetricsLogger logger(writer.get(), options);
  ASSERT_OK(logger.SampleOnce());
  std::set<std::string> tags = ScalarTagsIn(dir);
  EXPECT_THAT(tags,
              IsSupersetOf({"system/resident_memory_bytes", "system/threads"}));
  EXPECT_THAT(tags, Not(Contains("system/cpu_utilization")));

  volatile double spin = 0;
  for (int i = 0; i < 20'000'000; ++i) spin = spin + 1;  // some CPU time
  ASSERT_OK(logger.SampleOnce());
  EXPECT_THAT(
      ScalarTagsIn(dir),
      IsSupersetOf({"system/cpu_utilization", "system/disk_read_bytes_per_sec",
                    "system/network_receive_bytes_per_sec",
                    "system/network_transmit_bytes_per_sec"}));
  for (const tensorflow::Event& event : ReadEvents(writer->path())) {
    for (const auto& value : event.summary().value()) {
      if (value.tag() == "system/cpu_utilization") {
        EXPECT_GT(value.simple_value(), 0);
      }
      if (value.tag() == "system/threads") {
        EXPECT_GE(value.simple_value(), 1);
      }
    }
  }
}

TEST(SystemMetricsLoggerTest, GpusGetTagsOfTheirOwn) {
  const char* fake = std::getenv("FAKE_NVML");
  ASSERT_NE(fake, nullptr);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<GpuMonitor> gpus,
                       GpuMonitor::Open({std::string("./") + fake}));
  const std::string dir = FreshDir("gpus");
  ASSERT_OK_AND_ASSIGN(auto writer, EventFileWriter::Create(dir));
  SystemMetricsLogger::Options options;
  options.start_thread = false;
  options.gpus = gpus.get();
  SystemMetricsLogger logger(writer.get(), options);
  ASSERT_OK(logger.SampleOnce());
  const std::set<std::string> tags = ScalarTagsIn(dir);
  EXPECT_THAT(
      tags,
      IsSupersetOf({"system/gpu0/utilization", "system/gpu0/memory_used_bytes",
                    "system/gpu0/temperature_celsius",
                    "system/gpu0/power_watts", "system/gpu1/utilization"}));
  EXPECT_THAT(tags, Not(Contains("system/gpu1/power_watts")));
}

TEST(SystemMetricsLoggerTest, TheThreadWritesAtStartAndStopsPromptly) {
  const std::string dir = FreshDir("thread");
  ASSERT_OK_AND_ASSIGN(auto writer, EventFileWriter::Create(dir));
  SystemMetricsLogger::Options options;
  options.interval = absl::Hours(1);  // one sample, at start
  {
    SystemMetricsLogger logger(writer.get(), options);
    // Waits for the first sample: progress, not time.
    while (!ScalarTagsIn(dir).count("system/threads")) {
      absl::SleepFor(absl::Milliseconds(10));
    }
  }  // destruction must not wait out the hour
  EXPECT_THAT(ScalarTagsIn(dir), Contains("system/resident_memory_bytes"));
}

// The task's training scalars step by global step, the system ones by
// seconds: one axis per event file, so the system metrics get a file (a
// run) of their own under the task's directory.
TEST(SystemMetricsLoggerTest, StartWritesARunOfItsOwnBesideTheTasks) {
  const std::string task = FreshDir("task");
  ASSERT_OK_AND_ASSIGN(auto training, EventFileWriter::Create(task));
  ASSERT_OK(training->AddScalar("loss", 1000, 0.5));
  ASSERT_OK(training->Flush());
  SystemMetricsLogger::Options options;
  options.start_thread = false;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SystemMetricsLogger> logger,
                       SystemMetricsLogger::Start(task, options));
  ASSERT_OK(logger->SampleOnce());
  EXPECT_THAT(ScalarTagsIn(task + "/system"),
              Contains("system/resident_memory_bytes"));
  for (const tensorflow::Event& event : ReadEvents(training->path())) {
    for (const auto& value : event.summary().value()) {
      EXPECT_EQ(value.tag().rfind("system/", 0), std::string::npos)
          << value.tag() << " in the training file";
    }
  }
}

}  // namespace
}  // namespace psflow
