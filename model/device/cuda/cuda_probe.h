// Finds CUDA devices and checks that one really runs psflow's kernels.
//
// The worker uses this for `--device=auto`: a GPU is used only when a
// driver is present, a device is visible and a self-test kernel produces the
// right answer; otherwise the worker falls back to the CPU and logs why.
// CUDA errors are turned into absl::Status here and never leave this folder.
// Thread-compatible: call from one thread at start-up.
#ifndef PSFLOW_MODEL_DEVICE_CUDA_CUDA_PROBE_H_
#define PSFLOW_MODEL_DEVICE_CUDA_CUDA_PROBE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace psflow::cuda {

struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;  // e.g. "NVIDIA H100 80GB HBM3"
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  size_t total_memory_bytes = 0;
  int multiprocessors = 0;
};

// Every visible device. Unavailable (with the driver's reason) when there is
// no driver or no device: the normal case on CPU-only machines.
absl::StatusOr<std::vector<CudaDeviceInfo>> ListCudaDevices();

// Runs a small kernel on `ordinal` and compares its result with the CPU's.
// Unavailable when the device cannot run it (e.g. no kernel image for its
// architecture), Internal when it runs but computes the wrong answer.
absl::Status RunCudaSelfTest(int ordinal);

}  // namespace psflow::cuda

#endif  // PSFLOW_MODEL_DEVICE_CUDA_CUDA_PROBE_H_
