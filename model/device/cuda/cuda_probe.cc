#include "model/device/cuda/cuda_probe.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/device/cuda/cuda_resources.h"
#include "model/device/cuda/cuda_status.h"
#include "model/device/cuda/saxpy_kernel.h"

namespace psflow::cuda {

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
  RETURN_IF_CUDA_ERROR(cudaSetDevice(ordinal), "cudaSetDevice");
  std::vector<float> x(kN), y(kN), result(kN);
  for (int64_t i = 0; i < kN; ++i) {
    x[i] = static_cast<float>(i % 1000) * 0.5f;
    y[i] = static_cast<float>(i % 7) - 3.0f;
  }
  const size_t bytes = kN * sizeof(float);
  ASSIGN_OR_RETURN(DeviceMemory dx, AllocateDeviceMemory(bytes));
  ASSIGN_OR_RETURN(DeviceMemory dy, AllocateDeviceMemory(bytes));
  float* px = static_cast<float*>(dx.get());
  float* py = static_cast<float*>(dy.get());
  RETURN_IF_CUDA_ERROR(cudaMemcpy(px, x.data(), bytes, cudaMemcpyHostToDevice),
                       "copy to device");
  RETURN_IF_CUDA_ERROR(cudaMemcpy(py, y.data(), bytes, cudaMemcpyHostToDevice),
                       "copy to device");
  RETURN_IF_CUDA_ERROR(LaunchSaxpy(kA, px, py, kN, nullptr),
                       "self-test kernel launch");
  RETURN_IF_CUDA_ERROR(
      cudaMemcpy(result.data(), py, bytes, cudaMemcpyDeviceToHost),
      "self-test kernel run");
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
