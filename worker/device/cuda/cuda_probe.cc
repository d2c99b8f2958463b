#include "worker/device/cuda/cuda_probe.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "worker/device/cuda/saxpy_kernel.h"

namespace psflow::cuda {
namespace {

// The one place where a cudaError_t becomes a Status. Driver and device
// problems are Unavailable (the worker falls back to the CPU); anything
// else is Internal.
absl::Status FromCuda(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  std::string message =
      absl::StrCat(what, ": ", cudaGetErrorString(error), " (CUDA error ",
                   static_cast<int>(error), ")");
  switch (error) {
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorMemoryAllocation:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

// Owns a device allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  absl::Status Allocate(size_t bytes) {
    return FromCuda(cudaMalloc(&ptr_, bytes), "cudaMalloc");
  }
  float* get() const { return static_cast<float*>(ptr_); }

 private:
  void* ptr_ = nullptr;
};

}  // namespace

absl::StatusOr<std::vector<CudaDeviceInfo>> ListCudaDevices() {
  int count = 0;
  absl::Status status =
      FromCuda(cudaGetDeviceCount(&count), "no usable CUDA driver");
  if (!status.ok()) return absl::UnavailableError(status.message());
  if (count == 0) return absl::UnavailableError("no CUDA device is visible");
  std::vector<CudaDeviceInfo> devices;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    absl::Status prop_status =
        FromCuda(cudaGetDeviceProperties(&prop, i), "cudaGetDeviceProperties");
    if (!prop_status.ok()) return prop_status;
    devices.push_back(CudaDeviceInfo{i, prop.name, prop.major, prop.minor,
                                     prop.totalGlobalMem,
                                     prop.multiProcessorCount});
  }
  return devices;
}

absl::Status RunCudaSelfTest(int ordinal) {
  constexpr int64_t kN = 1 << 20;
  constexpr float kA = 2.5f;
  absl::Status status = FromCuda(cudaSetDevice(ordinal), "cudaSetDevice");
  if (!status.ok()) return status;
  std::vector<float> x(kN), y(kN), result(kN);
  for (int64_t i = 0; i < kN; ++i) {
    x[i] = static_cast<float>(i % 1000) * 0.5f;
    y[i] = static_cast<float>(i % 7) - 3.0f;
  }
  DeviceBuffer dx, dy;
  const size_t bytes = kN * sizeof(float);
  if (!(status = dx.Allocate(bytes)).ok()) return status;
  if (!(status = dy.Allocate(bytes)).ok()) return status;
  if (!(status = FromCuda(
            cudaMemcpy(dx.get(), x.data(), bytes, cudaMemcpyHostToDevice),
            "copy to device"))
           .ok()) {
    return status;
  }
  if (!(status = FromCuda(
            cudaMemcpy(dy.get(), y.data(), bytes, cudaMemcpyHostToDevice),
            "copy to device"))
           .ok()) {
    return status;
  }
  if (!(status = FromCuda(LaunchSaxpy(kA, dx.get(), dy.get(), kN, nullptr),
                          "self-test kernel launch"))
           .ok()) {
    return status;
  }
  if (!(status = FromCuda(
            cudaMemcpy(result.data(), dy.get(), bytes, cudaMemcpyDeviceToHost),
            "self-test kernel run"))
           .ok()) {
    return status;
  }
  for (int64_t i = 0; i < kN; ++i) {
    // a*x+y is exact in float for these inputs (x has one fractional bit).
    const float want = kA * x[i] + y[i];
    if (result[i] != want) {
      return absl::InternalError(absl::StrCat("CUDA self-test computed y[", i,
                                              "] = ", result[i], ", want ",
                                              want, " on device ", ordinal));
    }
  }
  return absl::OkStatus();
}

}  // namespace psflow::cuda
