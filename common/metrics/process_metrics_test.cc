#include "common/metrics/process_metrics.h"

#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/metrics/prometheus_text.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

TEST(ProcessMetricsTest, ParsesProcStatEvenWithOddCommandNames) {
  ProcessSample sample;
  // comm holds a space and a ')': fields are counted after the last ')'.
  ParseProcStat(
      "4242 (ps serv) er) S 1 4242 4242 0 -1 4194304 128 0 0 0 250 150 0 0 "
      "20 0 7 0 2842923 3133440 1000 18446744073709551615",
      100, 4096, sample);
  ASSERT_TRUE(sample.cpu_seconds.has_value());
  EXPECT_DOUBLE_EQ(*sample.cpu_seconds, 4.0);
  EXPECT_EQ(sample.threads, 7);
  EXPECT_EQ(sample.resident_bytes, 1000 * 4096);
  EXPECT_EQ(sample.virtual_bytes, 3133440);
  ASSERT_TRUE(sample.started_after_boot_seconds.has_value());
  EXPECT_DOUBLE_EQ(*sample.started_after_boot_seconds, 28429.23);
}

TEST(ProcessMetricsTest, ParsesTheBootTime) {
  EXPECT_EQ(ParseBootTime("cpu  1 2 3\nintr 5\nbtime 1795000000\nprocs 3\n"),
            1795000000);
  EXPECT_EQ(ParseBootTime("cpu  1 2 3\n"), std::nullopt);
}

TEST(ProcessMetricsTest, MalformedInputFillsNothing) {
  ProcessSample sample;
  ParseProcStat("garbage", 100, 4096, sample);
  ParseProcStat("1 (x) S 1 2", 100, 4096, sample);
  ParseProcIo("read_bytes: lots\nnonsense", sample);
  ParseProcNetDev("header only\n lo: 1 2\n", sample);
  EXPECT_FALSE(sample.cpu_seconds.has_value());
  EXPECT_FALSE(sample.threads.has_value());
  EXPECT_FALSE(sample.disk_read_bytes.has_value());
  EXPECT_TRUE(sample.network.empty());
}

TEST(ProcessMetricsTest, ParsesIoAndNetDev) {
  ProcessSample sample;
  ParseProcIo("rchar: 6976\nread_bytes: 512\nwrite_bytes: 4096\n", sample);
  EXPECT_EQ(sample.disk_read_bytes, 512);
  EXPECT_EQ(sample.disk_written_bytes, 4096);
  ParseProcNetDev(
      "Inter-|   Receive   |  Transmit\n"
      " face |bytes packets errs drop fifo frame compressed multicast|bytes\n"
      "    lo: 1132 14 0 0 0 0 0 0 1133 14 0 0 0 0 0 0\n"
      "  eth0: 10 1 0 0 0 0 0 0 20 2 0 0 0 0 0 0\n",
      sample);
  EXPECT_EQ(sample.network.at("lo"),
            std::make_pair(int64_t{1132}, int64_t{1133}));
  EXPECT_EQ(sample.network.at("eth0"),
            std::make_pair(int64_t{10}, int64_t{20}));
}

TEST(ProcessMetricsTest, TheLiveProcessShowsUpInTheRegistry) {
  MetricsRegistry registry;
  ASSERT_OK_AND_ASSIGN(auto handle, ExportProcessMetrics(&registry));
  volatile double spin = 0;
  for (int i = 0; i < 20'000'000; ++i) spin = spin + 1;  // some CPU time
  registry.Refresh();
  const std::string text = PrometheusText(registry.Snapshot());
  EXPECT_THAT(text, HasSubstr("psflow_process_threads "));
  // The standard names stock dashboards query.
  for (const char* name :
       {"process_cpu_seconds_total ", "process_virtual_memory_bytes ",
        "process_start_time_seconds ", "process_open_fds ",
        "process_max_fds "}) {
    EXPECT_THAT(text, HasSubstr(absl::StrCat("\n", name))) << name;
  }
  EXPECT_THAT(text, Not(HasSubstr("process_resident_memory_bytes 0\n")));
  EXPECT_THAT(text, HasSubstr("psflow_process_network_receive_bytes_total{"
                              "interface=\"lo\"}"));
  const ProcessSample sample = SampleProcess();
  ASSERT_TRUE(sample.cpu_seconds.has_value());
  EXPECT_GT(*sample.cpu_seconds, 0);
  // Started within the last day, and not in the future.
  ASSERT_TRUE(sample.start_time_seconds.has_value());
  const double now = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  EXPECT_LE(*sample.start_time_seconds, now + 1);
  EXPECT_GT(*sample.start_time_seconds, now - 86400);
  ASSERT_TRUE(sample.open_fds.has_value());
  EXPECT_GE(*sample.open_fds, 3);  // stdin, stdout, stderr at least
}

TEST(ProcessMetricsTest, ResidentMemoryGrowsWithTouchedPages) {
  const std::optional<int64_t> before = ResidentMemoryBytes();
  ASSERT_TRUE(before.has_value());
  std::vector<char> block(64 << 20, 1);  // 64 MiB, every page touched
  const std::optional<int64_t> after = ResidentMemoryBytes();
  ASSERT_TRUE(after.has_value());
  EXPECT_GE(*after - *before, 32 << 20) << block[block.size() / 2];
}

}  // namespace
}  // namespace psflow
