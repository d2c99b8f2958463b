#include "common/oom_kills.h"

#include <unistd.h>

#include "common/host_memory.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

// A real out-of-memory kill needs a memory-limited cgroup, which this test
// cannot count on; the count is read from the kernel, and a rise past
// `before` is what the note reports.
TEST(OomKillsTest, ARiseInTheKernelsCountIsReported) {
  const int64_t now = OomKillsSoFar();
  if (now < 0) GTEST_SKIP() << "this kernel has no oom_kill in /proc/vmstat";
  EXPECT_EQ(OomKillNote(now), "");
  EXPECT_EQ(OomKillNote(-1), "");  // unknown before: say nothing
  EXPECT_THAT(OomKillNote(now, now + 1),
              HasSubstr("out-of-memory killer killed a process"));
  EXPECT_EQ(OomKillNote(now, now), "");
}

TEST(HostMemoryTest, NeverMoreThanTheMachineHas) {
  const HostMemory memory = AvailableMemory();
  const int64_t machine = sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
  EXPECT_GT(memory.bytes, 0);
  EXPECT_LE(memory.bytes, machine);
  EXPECT_FALSE(memory.source.empty());
}

}  // namespace
}  // namespace psflow
