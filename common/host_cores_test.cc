#include "common/host_cores.h"

#include "gtest/gtest.h"

namespace psflow {
namespace {

TEST(HostCoresTest, AtLeastOneAndNoMoreThanTheMachineHas) {
  EXPECT_GE(UsableCores(), 1);
}

TEST(HostCoresTest, ReadsACgroupQuota) {
  EXPECT_EQ(CoresFromCpuMax("max 100000"), std::nullopt);
  EXPECT_EQ(CoresFromCpuMax("200000 100000"), 2);
  EXPECT_EQ(CoresFromCpuMax("150000 100000\n"), 2);  // 1.5 CPUs: 2 threads
  EXPECT_EQ(CoresFromCpuMax("50000 100000"), 1);
  EXPECT_EQ(CoresFromCpuMax(""), std::nullopt);
  EXPECT_EQ(CoresFromCpuMax("garbage"), std::nullopt);
  EXPECT_EQ(CoresFromCpuMax("-1 100000"), std::nullopt);
  EXPECT_EQ(CoresFromCpuMax("100000 0"), std::nullopt);
}

TEST(HostCoresTest, ReadsACgroupV1Quota) {
  EXPECT_EQ(CoresFromCfs("-1\n", "100000\n"), std::nullopt);
  EXPECT_EQ(CoresFromCfs("400000\n", "100000\n"), 4);
  EXPECT_EQ(CoresFromCfs("50000", "100000"), 1);
  EXPECT_EQ(CoresFromCfs("", "100000"), std::nullopt);
  EXPECT_EQ(CoresFromCfs("100000", ""), std::nullopt);
}

}  // namespace
}  // namespace psflow
