// The device conformance suite on the GPU (float32 and TF32 cuBLAS math),
// and what only the CUDA backend has: page-locked host buffers, arrays
// bound to their device, label errors reported after the fact.
#include "model/device/cuda/cuda_device.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <vector>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/device/cpu/cpu_device.h"
#include "model/device/device_conformance.h"

namespace psflow::cuda {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

absl::StatusOr<std::unique_ptr<Device>> Gpu(bool allow_tf32) {
  CudaBackendOptions options;
  options.allow_tf32 = allow_tf32;
  return CreateCudaDevice(options);
}

INSTANTIATE_TEST_SUITE_P(
    Devices, DeviceConformanceTest,
    ::testing::Values(DeviceCase{"Cuda", [] { return Gpu(false); }},
                      DeviceCase{"CudaTf32", [] { return Gpu(true); },
                                 /*gemm_tolerance=*/1e-2f}),
    DeviceCaseName);

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Device>> device = Gpu(false);
    PSFLOW_SKIP_IF_ABSENT(device.status());
    ASSERT_OK(device.status());
    device_ = *std::move(device);
  }

  std::shared_ptr<DeviceArray> On(const std::vector<float>& host) {
    auto array = device_->Allocate(host.size());
    EXPECT_OK(array.status());
    if (!array.ok()) return nullptr;
    EXPECT_OK(device_->Upload(host, **array));
    return *array;
  }

  std::unique_ptr<Device> device_;
};

TEST_F(CudaDeviceTest, DescribesTheGpuAndItsMath) {
  EXPECT_EQ(device_->kind(), DeviceKind::kCuda);
  EXPECT_THAT(device_->Describe(),
              AllOf(StartsWith("cuda:0 ("), HasSubstr("sm_"),
                    HasSubstr("cuBLAS float32")));
}

TEST_F(CudaDeviceTest, HostBuffersArePageLocked) {
  ASSERT_OK_AND_ASSIGN(auto buffer, device_->AllocateHost(1 << 20));
  cudaPointerAttributes attributes;
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, buffer->span().data()),
            cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost);
}

TEST_F(CudaDeviceTest, ArraysOfAnotherDeviceAreRejected) {
  auto cpu = CreateCpuDevice(1);
  ASSERT_OK_AND_ASSIGN(auto foreign, cpu->Allocate(16));
  auto mine = On(std::vector<float>(16, 1.0f));
  EXPECT_THAT(
      device_->Gemm(false, false, 4, 4, 4, 1, *foreign, *mine, 0, *mine),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("was not allocated by it")));
  ASSERT_OK_AND_ASSIGN(auto other_gpu, Gpu(false));
  ASSERT_OK_AND_ASSIGN(auto theirs, other_gpu->Allocate(16));
  EXPECT_THAT(device_->ColumnSums(4, 4, *theirs, *mine),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// More softmax calls than the device keeps label checks for between
// synchronizations: the first bad label is still the one reported.
TEST_F(CudaDeviceTest, ManySoftmaxCallsStillReportTheFirstBadLabel) {
  auto logits = On(std::vector<float>(4 * 3, 0.5f));
  auto good = On({0, 1, 2, 0}), bad = On({0, 1, 7, 0});
  ASSERT_OK_AND_ASSIGN(auto pred, device_->Allocate(4));
  ASSERT_OK_AND_ASSIGN(auto stats, device_->Allocate(2));
  absl::Status status;
  for (int call = 0; call < 40 && status.ok(); ++call) {
    status = device_->SoftmaxCrossEntropy(
        4, 3, *logits, call == 5 ? *bad : *good, nullptr, *pred, *stats);
  }
  if (status.ok()) status = device_->Synchronize();
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("label 7 of example 2 is outside "
                                         "the model's 3 classes")));
  EXPECT_OK(device_->Synchronize());  // reported once
}

TEST_F(CudaDeviceTest, ADownloadReportsABadLabelOfEarlierWork) {
  auto logits = On(std::vector<float>(2 * 3, 0.5f));
  ASSERT_OK_AND_ASSIGN(auto pred, device_->Allocate(2));
  ASSERT_OK_AND_ASSIGN(auto stats, device_->Allocate(2));
  ASSERT_OK(device_->SoftmaxCrossEntropy(2, 3, *logits, *On({-2, 0}), nullptr,
                                         *pred, *stats));
  float host[2];
  EXPECT_THAT(device_->Download(*stats, absl::MakeSpan(host, 2)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("label -2 of example 0")));
}

}  // namespace
}  // namespace psflow::cuda
