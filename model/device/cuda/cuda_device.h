// The CUDA backend of the worker's Device interface (model/device/device.h):
// cuBLAS SGEMM for the dense layers and convolutions (row_major_gemm.h),
// psflow's own kernels for the rest (*_kernels.h): bias + activation, its
// backward, column sums, softmax cross-entropy, and the layer ops
// (element-wise, im2col/col2im and pooling, batch normalization). Every
// kernel is deterministic: reductions add in a fixed order, never with
// atomics.
//
// Three streams: compute (kernels and cuBLAS), upload (host to device) and
// download (device to host). Copies wait only for the compute work issued
// before them and for earlier copies of the same array; compute waits only
// for the copies of the arrays it touches (cuda_array.h). With page-locked
// host memory from AllocateHost, uploads return at once and DownloadAsync
// runs while later layers compute: a worker's pulled weights and pushed
// gradients travel over PCIe in the shadow of the math.
//
// Not thread-safe: one thread at a time, as the interface says. Every call
// makes the device current on the calling thread first.
#ifndef PSFLOW_MODEL_DEVICE_CUDA_CUDA_DEVICE_H_
#define PSFLOW_MODEL_DEVICE_CUDA_CUDA_DEVICE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "model/device/cuda_backend.h"
#include "model/device/device.h"

namespace psflow::cuda {

// The backend on GPU `options.ordinal`, without the probe's self-test
// (OpenCudaBackend adds it). Unavailable when there is no such GPU or
// driver; ResourceExhausted when its memory is full.
absl::StatusOr<std::unique_ptr<Device>> CreateCudaDevice(
    const CudaBackendOptions& options);

}  // namespace psflow::cuda

#endif  // PSFLOW_MODEL_DEVICE_CUDA_CUDA_DEVICE_H_
