// The one place where CUDA runtime and cuBLAS error codes become
// absl::Status (STYLE.md: cudaError_t and cublasStatus_t never leave
// model/device/cuda/). Messages name the call and carry the library's own
// error string, e.g. "cudaMemcpyAsync (upload): out of memory (CUDA error
// 2)".
//
// Codes: a missing or unusable driver/device is Unavailable (the worker
// falls back to the CPU); an allocation failure is ResourceExhausted;
// anything else is Internal (a bug or a broken device). Thread-safe.
#ifndef PSFLOW_MODEL_DEVICE_CUDA_CUDA_STATUS_H_
#define PSFLOW_MODEL_DEVICE_CUDA_CUDA_STATUS_H_

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace psflow::cuda {

absl::Status FromCuda(cudaError_t error, absl::string_view call);
absl::Status FromCublas(cublasStatus_t status, absl::string_view call);

}  // namespace psflow::cuda

// Returns from the enclosing function (absl::Status or StatusOr) when a
// CUDA runtime call fails, naming the call.
#define RETURN_IF_CUDA_ERROR(expr, call)                        \
  do {                                                          \
    const cudaError_t psflow_cuda_error = (expr);               \
    if (psflow_cuda_error != cudaSuccess) {                     \
      return ::psflow::cuda::FromCuda(psflow_cuda_error, call); \
    }                                                           \
  } while (false)

#define RETURN_IF_CUBLAS_ERROR(expr, call)                           \
  do {                                                               \
    const cublasStatus_t psflow_cublas_status = (expr);              \
    if (psflow_cublas_status != CUBLAS_STATUS_SUCCESS) {             \
      return ::psflow::cuda::FromCublas(psflow_cublas_status, call); \
    }                                                                \
  } while (false)

#endif  // PSFLOW_MODEL_DEVICE_CUDA_CUDA_STATUS_H_
