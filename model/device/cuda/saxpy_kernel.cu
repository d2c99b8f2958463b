#include "model/device/cuda/saxpy_kernel.h"

namespace psflow::cuda {
namespace {

__global__ void SaxpyKernel(float a, const float* __restrict__ x,
                            float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = a * x[i] + y[i];
  }
}

}  // namespace

cudaError_t LaunchSaxpy(float a, const float* x, float* y, int64_t n,
                        cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t wanted = (n + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < 65535 ? wanted : 65535);
  SaxpyKernel<<<blocks, kThreads, 0, stream>>>(a, x, y, n);
  return cudaGetLastError();
}

}  // namespace psflow::cuda
