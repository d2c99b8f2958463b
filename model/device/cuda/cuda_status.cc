#include "model/device/cuda/cuda_status.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "model/device/cuda/cublas_api.h"

namespace psflow::cuda {

absl::Status FromCuda(cudaError_t error, absl::string_view call) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message =
      absl::StrCat(call, ": ", cudaGetErrorString(error), " (CUDA error ",
                   static_cast<int>(error), ")");
  switch (error) {
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorInitializationError:
      return absl::UnavailableError(message);
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

namespace {

// cuBLAS's own name for `status` when the library is loaded.
std::string CublasStatusName(cublasStatus_t status) {
  absl::StatusOr<const CublasApi*> api = Cublas();
  if (!api.ok()) return "cuBLAS error";
  return (*api)->get_status_string(status);
}

}  // namespace

absl::Status FromCublas(cublasStatus_t status, absl::string_view call) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string message =
      absl::StrCat(call, ": ", CublasStatusName(status), " (cuBLAS status ",
                   static_cast<int>(status), ")");
  switch (status) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return absl::UnavailableError(message);
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace psflow::cuda
