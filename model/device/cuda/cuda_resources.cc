#include "model/device/cuda/cuda_resources.h"

#include <algorithm>
#include <cstring>

#include "common/status_macros.h"
#include "model/device/cuda/cublas_api.h"
#include "model/device/cuda/cuda_status.h"

namespace psflow::cuda {

absl::StatusOr<DeviceMemory> AllocateDeviceMemory(size_t bytes) {
  void* p = nullptr;
  RETURN_IF_CUDA_ERROR(cudaMalloc(&p, std::max<size_t>(bytes, 1)),
                       "cudaMalloc");
  return DeviceMemory(p);
}

absl::StatusOr<PinnedMemory> AllocatePinnedMemory(size_t bytes) {
  void* p = nullptr;
  bytes = std::max<size_t>(bytes, 1);
  RETURN_IF_CUDA_ERROR(cudaHostAlloc(&p, bytes, cudaHostAllocDefault),
                       "cudaHostAlloc");
  std::memset(p, 0, bytes);
  return PinnedMemory(p);
}

absl::StatusOr<Stream> CreateStream() {
  cudaStream_t s = nullptr;
  RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
                       "cudaStreamCreateWithFlags");
  return Stream(s);
}

absl::StatusOr<Event> CreateEvent() {
  cudaEvent_t e = nullptr;
  RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
                       "cudaEventCreateWithFlags");
  return Event(e);
}

void CublasDeleter::operator()(cublasHandle_t h) const {
  // A handle exists only if cuBLAS was loaded.
  if (absl::StatusOr<const CublasApi*> api = Cublas(); api.ok()) {
    (void)(*api)->destroy(h);
  }
}

absl::StatusOr<CublasHandle> CreateCublasHandle(cudaStream_t stream,
                                                bool allow_tf32) {
  ASSIGN_OR_RETURN(const CublasApi* api, Cublas());
  cublasHandle_t h = nullptr;
  RETURN_IF_CUBLAS_ERROR(api->create(&h), "cublasCreate");
  CublasHandle handle(h);
  RETURN_IF_CUBLAS_ERROR(api->set_stream(h, stream), "cublasSetStream");
  RETURN_IF_CUBLAS_ERROR(
      api->set_math_mode(
          h, allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
      "cublasSetMathMode");
  return handle;
}

}  // namespace psflow::cuda
