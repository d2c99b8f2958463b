// RAII owners for the CUDA objects the backend holds: device memory,
// page-locked host memory, streams, events and the cuBLAS handle. Each is a
// std::unique_ptr with a deleter, made by a factory that returns the
// failure as a Status (cuda_status.h). Destructors cannot report errors;
// they release what they own and ignore the result (the context is being
// torn down or a sticky error was already reported by the last call).
//
// Freeing device or page-locked memory waits for the GPU to finish work
// that may still use it (cudaFree/cudaFreeHost synchronize).
// Thread-compatible.
#ifndef PSFLOW_MODEL_DEVICE_CUDA_CUDA_RESOURCES_H_
#define PSFLOW_MODEL_DEVICE_CUDA_CUDA_RESOURCES_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"

namespace psflow::cuda {

struct DeviceMemoryDeleter {
  void operator()(void* p) const { (void)cudaFree(p); }
};
struct HostMemoryDeleter {
  void operator()(void* p) const { (void)cudaFreeHost(p); }
};
struct StreamDeleter {
  void operator()(cudaStream_t s) const { (void)cudaStreamDestroy(s); }
};
struct EventDeleter {
  void operator()(cudaEvent_t e) const { (void)cudaEventDestroy(e); }
};
struct CublasDeleter {
  void operator()(cublasHandle_t h) const;
};

using DeviceMemory = std::unique_ptr<void, DeviceMemoryDeleter>;
using PinnedMemory = std::unique_ptr<void, HostMemoryDeleter>;
using Stream = std::unique_ptr<CUstream_st, StreamDeleter>;
using Event = std::unique_ptr<CUevent_st, EventDeleter>;
using CublasHandle = std::unique_ptr<cublasContext, CublasDeleter>;

// `bytes` of device memory on the current device (at least 1 byte, so the
// pointer is never null). ResourceExhausted when the GPU is full.
absl::StatusOr<DeviceMemory> AllocateDeviceMemory(size_t bytes);

// `bytes` of page-locked host memory, zero-filled.
absl::StatusOr<PinnedMemory> AllocatePinnedMemory(size_t bytes);

// A stream that does not synchronize with the legacy default stream.
absl::StatusOr<Stream> CreateStream();

// An event for ordering only (no timing), cheap to record and wait on.
absl::StatusOr<Event> CreateEvent();

// A cuBLAS handle issuing work on `stream`; TF32 tensor-core math when
// `allow_tf32`, IEEE float32 otherwise.
absl::StatusOr<CublasHandle> CreateCublasHandle(cudaStream_t stream,
                                                bool allow_tf32);

}  // namespace psflow::cuda

#endif  // PSFLOW_MODEL_DEVICE_CUDA_CUDA_RESOURCES_H_
