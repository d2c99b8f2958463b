// Picks the compute device for --device=auto|cpu|cuda and says why.
#ifndef PSFLOW_WORKER_DEVICE_SELECT_DEVICE_H_
#define PSFLOW_WORKER_DEVICE_SELECT_DEVICE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/device/device.h"

namespace psflow {

// "cpu" gives the CPU backend with `cpu_threads` threads; "auto" gives the
// CPU backend too until the CUDA backend lands, and logs so; "cuda" is
// FailedPrecondition in a build without it. InvalidArgument otherwise.
absl::StatusOr<std::unique_ptr<Device>> SelectDevice(const std::string& flag,
                                                     int cpu_threads);

}  // namespace psflow

#endif  // PSFLOW_WORKER_DEVICE_SELECT_DEVICE_H_
