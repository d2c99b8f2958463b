#include <algorithm>

#include "model/device/cuda/elementwise_kernels.h"
#include "model/device/dropout_hash.h"

namespace psflow::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4 * 65535;  // grid-stride loops beyond

unsigned Blocks(int64_t n) {
  return static_cast<unsigned>(
      std::min((n + kThreads - 1) / kThreads, kMaxBlocks));
}

// The outputs may alias the inputs (no __restrict__): every thread reads
// its element before writing it, and no element is touched by two threads.
__global__ void ScaleShiftKernel(int64_t n, float scale, float offset,
                                 const float* x, float* y) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * kThreads) {
    y[i] = x[i] * scale + offset;
  }
}

__global__ void MultiplyKernel(int64_t n, const float* a, const float* b,
                               float* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * kThreads) {
    out[i] = a[i] * b[i];
  }
}

__global__ void DropoutMaskKernel(int64_t n, float rate, uint64_t seed,
                                  float* __restrict__ mask) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * kThreads) {
    mask[i] = DropoutScale(seed, static_cast<uint64_t>(i), rate);
  }
}

}  // namespace

cudaError_t LaunchScaleShift(int64_t n, float scale, float offset,
                             const float* x, float* y, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ScaleShiftKernel<<<Blocks(n), kThreads, 0, stream>>>(n, scale, offset, x, y);
  return cudaGetLastError();
}

cudaError_t LaunchMultiply(int64_t n, const float* a, const float* b,
                           float* out, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  MultiplyKernel<<<Blocks(n), kThreads, 0, stream>>>(n, a, b, out);
  return cudaGetLastError();
}

cudaError_t LaunchDropoutMask(int64_t n, float rate, uint64_t seed, float* mask,
                              cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  DropoutMaskKernel<<<Blocks(n), kThreads, 0, stream>>>(n, rate, seed, mask);
  return cudaGetLastError();
}

}  // namespace psflow::cuda
