// Element-wise kernels of the layer ops: scale + shift, products (dropout's
// mask applied, gates) and dropout's mask. Plain C++ interface in front of
// the .cu file; see activation_kernels.h for the conventions.
#ifndef PSFLOW_MODEL_DEVICE_CUDA_ELEMENTWISE_KERNELS_H_
#define PSFLOW_MODEL_DEVICE_CUDA_ELEMENTWISE_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace psflow::cuda {

// y[n] = scale * x[n] + offset; y may be x.
cudaError_t LaunchScaleShift(int64_t n, float scale, float offset,
                             const float* x, float* y, cudaStream_t stream);

// out[n] = a[n] * b[n]; out may be a or b.
// y[n] += alpha * x[n].
cudaError_t LaunchAxpy(int64_t n, float alpha, const float* x, float* y,
                       cudaStream_t stream);

// Device::CopyBlock on device pointers already offset to the blocks.
cudaError_t LaunchCopyBlock(int64_t rows, int64_t cols, const float* src,
                            int64_t src_stride, float* dst, int64_t dst_stride,
                            bool accumulate, cudaStream_t stream);

cudaError_t LaunchMultiply(int64_t n, const float* a, const float* b,
                           float* out, cudaStream_t stream);

// mask[i] = DropoutScale(seed, i, rate) (model/device/dropout_hash.h): the
// same bits as the CPU backend's mask. 0 <= rate < 1.
cudaError_t LaunchDropoutMask(int64_t n, float rate, uint64_t seed, float* mask,
                              cudaStream_t stream);

}  // namespace psflow::cuda

#endif  // PSFLOW_MODEL_DEVICE_CUDA_ELEMENTWISE_KERNELS_H_
