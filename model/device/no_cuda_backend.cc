// OpenCudaBackend for builds without the CUDA toolkit (see cuda_backend.h).
#include "model/device/cuda_backend.h"

namespace psflow {

absl::StatusOr<std::unique_ptr<Device>> OpenCudaBackend(
    const CudaBackendOptions& options) {
  return absl::FailedPreconditionError(
      "this worker was built without CUDA (no toolkit at build time, or "
      "--config=nocuda)");
}

}  // namespace psflow
