// OpenCudaBackend for builds with the CUDA toolkit (see
// model/device/cuda_backend.h): probe, self-test, then the device.
#include "model/device/cuda_backend.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/device/cuda/cuda_device.h"
#include "model/device/cuda/cuda_probe.h"

namespace psflow {

absl::StatusOr<std::unique_ptr<Device>> OpenCudaBackend(
    const CudaBackendOptions& options) {
  ASSIGN_OR_RETURN(std::vector<cuda::CudaDeviceInfo> devices,
                   cuda::ListCudaDevices());
  if (options.ordinal < 0 ||
      options.ordinal >= static_cast<int>(devices.size())) {
    return absl::UnavailableError(absl::StrCat("there is no GPU ",
                                               options.ordinal, " (",
                                               devices.size(), " visible)"));
  }
  absl::Status self_test = cuda::RunCudaSelfTest(options.ordinal);
  if (!self_test.ok()) {
    const cuda::CudaDeviceInfo& info = devices[options.ordinal];
    return absl::Status(
        self_test.code(),
        absl::StrCat("GPU ", options.ordinal, " (", info.name, ", sm_",
                     info.compute_capability_major,
                     info.compute_capability_minor,
                     ") failed psflow's self-test: ", self_test.message()));
  }
  return cuda::CreateCudaDevice(options);
}

}  // namespace psflow
