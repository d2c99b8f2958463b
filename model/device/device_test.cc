// The conformance suite (device_conformance.h) on the CPU backend. The CUDA
// backend runs the same suite in cuda/cuda_device_test.cc.
#include "model/device/cpu/cpu_device.h"
#include "model/device/device_conformance.h"

namespace psflow {
namespace {

INSTANTIATE_TEST_SUITE_P(
    Devices, DeviceConformanceTest,
    ::testing::Values(
        DeviceCase{"Cpu",
                   []() -> absl::StatusOr<std::unique_ptr<Device>> {
                     return CreateCpuDevice(1);
                   }},
        DeviceCase{"CpuTwoThreads",
                   []() -> absl::StatusOr<std::unique_ptr<Device>> {
                     return CreateCpuDevice(2);
                   }},
        DeviceCase{"CpuThreeThreads",
                   []() -> absl::StatusOr<std::unique_ptr<Device>> {
                     return CreateCpuDevice(3);
                   }}),
    DeviceCaseName);

}  // namespace
}  // namespace psflow
