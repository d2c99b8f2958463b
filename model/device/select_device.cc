#include "model/device/select_device.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "model/device/cpu/cpu_device.h"
#include "model/device/cuda_backend.h"

namespace psflow {

absl::StatusOr<std::unique_ptr<Device>> SelectDevice(const std::string& flag,
                                                     int cpu_threads) {
  if (flag == "cpu") {
    std::unique_ptr<Device> device = CreateCpuDevice(cpu_threads);
    LOG(INFO) << "--device=cpu: using " << device->Describe();
    return device;
  }
  if (flag == "cuda" || flag == "auto") {
    absl::StatusOr<std::unique_ptr<Device>> gpu =
        OpenCudaBackend(CudaBackendOptions());
    if (gpu.ok()) {
      LOG(INFO) << "--device=" << flag << ": using " << (*gpu)->Describe();
      return gpu;
    }
    if (flag == "cuda") {
      return absl::FailedPreconditionError(
          absl::StrCat("--device=cuda: no usable GPU: ", gpu.status().message(),
                       "; use --device=cpu or --device=auto"));
    }
    std::unique_ptr<Device> device = CreateCpuDevice(cpu_threads);
    LOG(INFO) << "--device=auto: no usable GPU (" << gpu.status().message()
              << "); using " << device->Describe();
    return device;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--device=", flag, " is not a device; use auto, cpu or cuda"));
}

}  // namespace psflow
