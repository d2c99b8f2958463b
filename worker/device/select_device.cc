#include "worker/device/select_device.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "worker/device/cpu/cpu_device.h"

namespace psflow {

absl::StatusOr<std::unique_ptr<Device>> SelectDevice(const std::string& flag,
                                                     int cpu_threads) {
  if (flag == "cpu") return CreateCpuDevice(cpu_threads);
  if (flag == "auto") {
    LOG(INFO) << "--device=auto: using the CPU (this build has no CUDA "
                 "training backend yet)";
    return CreateCpuDevice(cpu_threads);
  }
  if (flag == "cuda") {
    return absl::FailedPreconditionError(
        "--device=cuda: this build has no CUDA training backend yet; use "
        "--device=cpu or --device=auto");
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--device=", flag, " is not a device; use auto, cpu or cuda"));
}

}  // namespace psflow
