// Picks the compute device for --device=auto|cpu|cuda and logs which one
// it uses and why.
#ifndef PSFLOW_MODEL_DEVICE_SELECT_DEVICE_H_
#define PSFLOW_MODEL_DEVICE_SELECT_DEVICE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/device/device.h"

namespace psflow {

// "cpu": the CPU backend with `cpu_threads` threads.
// "cuda": GPU 0 (cuda_backend.h); FailedPrecondition with the reason when
//   there is none or this build has no CUDA backend.
// "auto": GPU 0 when it is usable, else the CPU backend, logging why.
// InvalidArgument for anything else.
absl::StatusOr<std::unique_ptr<Device>> SelectDevice(const std::string& flag,
                                                     int cpu_threads);

}  // namespace psflow

#endif  // PSFLOW_MODEL_DEVICE_SELECT_DEVICE_H_
