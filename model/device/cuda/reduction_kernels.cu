#include "model/device/cuda/reduction_kernels.h"

namespace psflow::cuda {
namespace {

// A block owns 32 adjacent columns; its 32 x 32 threads split the rows
// into 32 interleaved slices (threadIdx.y), so each warp reads 128
// contiguous bytes per row. The slices' partial sums are then added in a
// fixed order through shared memory: deterministic, no atomics.
constexpr int kTile = 32;

__global__ void ColumnSumsKernel(int64_t rows, int64_t cols,
                                 const float* __restrict__ x,
                                 float* __restrict__ sums) {
  __shared__ float partial[kTile][kTile + 1];  // +1: no bank conflicts
  const int64_t col = blockIdx.x * static_cast<int64_t>(kTile) + threadIdx.x;
  float sum = 0.0f;
  if (col < cols) {
    for (int64_t row = threadIdx.y; row < rows; row += kTile) {
      sum += x[row * cols + col];
    }
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  // Tree over the slices: stride 16, 8, ..., 1 within each column.
  for (int stride = kTile / 2; stride > 0; stride /= 2) {
    if (threadIdx.y < stride) {
      partial[threadIdx.y][threadIdx.x] +=
          partial[threadIdx.y + stride][threadIdx.x];
    }
    __syncthreads();
  }
  if (threadIdx.y == 0 && col < cols) sums[col] = partial[0][threadIdx.x];
}

}  // namespace

cudaError_t LaunchColumnSums(int64_t rows, int64_t cols, const float* x,
                             float* sums, cudaStream_t stream) {
  if (cols <= 0) return cudaSuccess;
  const dim3 block(kTile, kTile);
  const unsigned blocks = static_cast<unsigned>((cols + kTile - 1) / kTile);
  ColumnSumsKernel<<<blocks, block, 0, stream>>>(rows, cols, x, sums);
  return cudaGetLastError();
}

}  // namespace psflow::cuda
