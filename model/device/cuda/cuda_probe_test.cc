#include "model/device/cuda/cuda_probe.h"

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow::cuda {
namespace {

using ::testing::HasSubstr;

// Skips the calling test when this machine has no usable GPU.
#define SKIP_WITHOUT_GPU()                                                   \
  do {                                                                       \
    absl::StatusOr<std::vector<CudaDeviceInfo>> devices = ListCudaDevices(); \
    if (!devices.ok()) GTEST_SKIP() << devices.status().message();           \
  } while (false)

TEST(CudaProbeTest, ReportsNoDeviceAsUnavailableOrListsDevices) {
  absl::StatusOr<std::vector<CudaDeviceInfo>> devices = ListCudaDevices();
  if (!devices.ok()) {
    EXPECT_THAT(devices, StatusIs(absl::StatusCode::kUnavailable));
    return;
  }
  ASSERT_FALSE(devices->empty());
  for (const CudaDeviceInfo& device : *devices) {
    EXPECT_FALSE(device.name.empty());
    EXPECT_GE(device.compute_capability_major, 7);
    EXPECT_GT(device.total_memory_bytes, 0u);
    EXPECT_GT(device.multiprocessors, 0);
  }
}

TEST(CudaProbeTest, SelfTestKernelMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  EXPECT_OK(RunCudaSelfTest(0));
}

TEST(CudaProbeTest, SelfTestOnAMissingDeviceIsUnavailable) {
  SKIP_WITHOUT_GPU();
  EXPECT_THAT(RunCudaSelfTest(1 << 20), StatusIs(absl::StatusCode::kUnavailable,
                                                 HasSubstr("cudaSetDevice")));
}

}  // namespace
}  // namespace psflow::cuda
