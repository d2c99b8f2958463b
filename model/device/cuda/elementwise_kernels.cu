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

__global__ void AxpyKernel(int64_t n, float alpha, const float* __restrict__ x,
                           float* __restrict__ y) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * kThreads) {
    y[i] += alpha * x[i];
  }
}

// One grid-stride loop over the block's rows * cols elements.
__global__ void CopyBlockKernel(int64_t rows, int64_t cols,
                                const float* __restrict__ src,
                                int64_t src_stride, float* __restrict__ dst,
                                int64_t dst_stride, bool accumulate) {
  const int64_t total = rows * cols;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
       e < total; e += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t r = e / cols, j = e - r * cols;
    const float v = src[r * src_stride + j];
    float& out = dst[r * dst_stride + j];
    out = accumulate ? out + v : v;
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

cudaError_t LaunchAxpy(int64_t n, float alpha, const float* x, float* y,
                       cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  AxpyKernel<<<Blocks(n), kThreads, 0, stream>>>(n, alpha, x, y);
  return cudaGetLastError();
}

cudaError_t LaunchCopyBlock(int64_t rows, int64_t cols, const float* src,
                            int64_t src_stride, float* dst, int64_t dst_stride,
                            bool accumulate, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  CopyBlockKernel<<<Blocks(rows * cols), kThreads, 0, stream>>>(
      rows, cols, src, src_stride, dst, dst_stride, accumulate);
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
