#include "model/device/select_device.h"

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/device/cuda_backend.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(SelectDeviceTest, CpuGivesTheCpuBackend) {
  ASSERT_OK_AND_ASSIGN(auto device, SelectDevice("cpu", 2));
  EXPECT_EQ(device->kind(), DeviceKind::kCpu);
  EXPECT_THAT(device->Describe(), HasSubstr("2 threads"));
}

TEST(SelectDeviceTest, UnknownDevicesAreInvalid) {
  EXPECT_THAT(SelectDevice("tpu", 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--device=tpu is not a device")));
}

// Whether this machine has a GPU decides the answer; both cases are
// checked against what the CUDA backend itself says.
TEST(SelectDeviceTest, CudaIsTheGpuOrAFailedPreconditionSayingWhy) {
  absl::StatusOr<std::unique_ptr<Device>> gpu =
      OpenCudaBackend(CudaBackendOptions());
  absl::StatusOr<std::unique_ptr<Device>> device = SelectDevice("cuda", 1);
  if (gpu.ok()) {
    ASSERT_OK(device.status());
    EXPECT_EQ((*device)->kind(), DeviceKind::kCuda);
    EXPECT_THAT((*device)->Describe(), StartsWith("cuda:0"));
  } else {
    EXPECT_THAT(device, StatusIs(absl::StatusCode::kFailedPrecondition,
                                 AllOf(HasSubstr("--device=cuda: no usable "
                                                 "GPU"),
                                       HasSubstr(gpu.status().message()))));
  }
}

TEST(SelectDeviceTest, AutoFallsBackToTheCpuOnlyWithoutAGpu) {
  const bool have_gpu = OpenCudaBackend(CudaBackendOptions()).ok();
  ASSERT_OK_AND_ASSIGN(auto device, SelectDevice("auto", 1));
  EXPECT_EQ(device->kind(), have_gpu ? DeviceKind::kCuda : DeviceKind::kCpu);
}

}  // namespace
}  // namespace psflow
