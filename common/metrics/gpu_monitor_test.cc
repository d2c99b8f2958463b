#include "common/metrics/gpu_monitor.h"

#include <cstdlib>

#include "common/metrics/prometheus_text.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

// Where this machine has no NVIDIA driver (CI, most developers' laptops),
// opening fails with a reason instead of crashing or aborting.
TEST(GpuMonitorTest, AMissingLibraryIsUnavailableWithTheReason) {
  absl::StatusOr<std::unique_ptr<GpuMonitor>> monitor =
      GpuMonitor::Open({"/nonexistent/libnvidia-ml.so.1"});
  EXPECT_THAT(monitor, StatusIs(absl::StatusCode::kUnavailable,
                                HasSubstr("libnvidia-ml.so.1")));
}

TEST(GpuMonitorTest, ALibraryWithoutNvmlIsRefused) {
  // libm opens but has none of NVML's entry points.
  EXPECT_THAT(
      GpuMonitor::Open({"libm.so.6"}),
      StatusIs(absl::StatusCode::kUnavailable, HasSubstr("lacks nvmlInit_v2")));
}

// Against the stand-in library (fake_nvml_for_test.cc): two GPUs, the
// second without power readings.
TEST(GpuMonitorTest, ReadsEveryGpuInOurUnits) {
  const char* fake = std::getenv("FAKE_NVML");
  ASSERT_NE(fake, nullptr);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<GpuMonitor> monitor,
                       GpuMonitor::Open({std::string("./") + fake}));
  ASSERT_EQ(monitor->device_count(), 2);
  std::vector<GpuSample> samples = monitor->Sample();
  ASSERT_EQ(samples.size(), 2);
  EXPECT_EQ(samples[0].name, "Fake GPU");
  EXPECT_DOUBLE_EQ(*samples[0].utilization, 0.87);
  EXPECT_EQ(*samples[0].memory_used_bytes, int64_t{3} << 30);
  EXPECT_EQ(*samples[0].memory_total_bytes, int64_t{80} << 30);
  EXPECT_DOUBLE_EQ(*samples[0].temperature_celsius, 61);
  EXPECT_DOUBLE_EQ(*samples[0].power_watts, 245.5);
  EXPECT_EQ(samples[1].index, 1);
  EXPECT_FALSE(samples[1].power_watts.has_value());

  MetricsRegistry registry;
  ASSERT_OK_AND_ASSIGN(auto handle, ExportGpuMetrics(&registry, monitor.get()));
  registry.Refresh();
  const std::string text = PrometheusText(registry.Snapshot());
  EXPECT_THAT(text, HasSubstr("psflow_gpu_utilization_ratio{gpu=\"1\"} 0.87"));
  EXPECT_THAT(text, HasSubstr("psflow_gpu_power_watts{gpu=\"0\"} 245.5"));
  EXPECT_THAT(text, Not(HasSubstr("psflow_gpu_power_watts{gpu=\"1\"}")));
}

}  // namespace
}  // namespace psflow
