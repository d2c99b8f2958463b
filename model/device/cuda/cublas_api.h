// cuBLAS, loaded at run time (dlopen) instead of linked: psflow binaries
// built with the CUDA toolkit then start on machines without cuBLAS (CPU
// hosts, slim containers) and use the CPU backend there, while a GPU
// machine's libcublas.so.13 is found by the usual library search (and the
// toolkit paths below).
#ifndef PSFLOW_MODEL_DEVICE_CUDA_CUBLAS_API_H_
#define PSFLOW_MODEL_DEVICE_CUDA_CUBLAS_API_H_

#include <cublas_v2.h>

#include "absl/status/statusor.h"

namespace psflow::cuda {

// The cuBLAS entry points psflow uses. (cublas_v2.h maps cublasCreate and
// friends to their _v2 symbols; these are those.)
struct CublasApi {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasGetStream_v2) get_stream;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasSgemm_v2) sgemm;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched;
  decltype(&cublasSscal_v2) sscal;
  decltype(&cublasGetStatusString) get_status_string;
};

// Loads libcublas once (thread-safe); later calls return the same result.
// Unavailable, naming what was tried, when it cannot be loaded.
absl::StatusOr<const CublasApi*> Cublas();

}  // namespace psflow::cuda

#endif  // PSFLOW_MODEL_DEVICE_CUDA_CUBLAS_API_H_
