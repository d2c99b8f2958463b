// The CUDA backend as seen from code that must also build without CUDA.
//
// A build with the CUDA toolkit links the implementation in
// cuda/cuda_backend.cc; a build without one (or --config=nocuda) links
// no_cuda_backend.cc instead, which explains that CUDA is not built in.
// select_device.cc and tests call this and never branch on the build.
#ifndef PSFLOW_MODEL_DEVICE_CUDA_BACKEND_H_
#define PSFLOW_MODEL_DEVICE_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "model/device/device.h"

namespace psflow {

struct CudaBackendOptions {
  // Which GPU (CUDA's device ordinal).
  int ordinal = 0;
  // Lets cuBLAS round GEMM inputs to TF32 on tensor cores: several times
  // faster, about 1e-3 relative error instead of float32's 1e-6. Off by
  // default, as in PyTorch.
  bool allow_tf32 = false;
};

// Opens GPU `options.ordinal` after checking that it runs psflow's kernels
// (a self-test). FailedPrecondition: this build has no CUDA backend.
// Unavailable: no driver, no such GPU, or the GPU cannot run our code (the
// message says which). Other codes for failures while setting it up.
absl::StatusOr<std::unique_ptr<Device>> OpenCudaBackend(
    const CudaBackendOptions& options);

}  // namespace psflow

#endif  // PSFLOW_MODEL_DEVICE_CUDA_BACKEND_H_
