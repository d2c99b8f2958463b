#include <algorithm>

#include "model/device/cuda/batch_norm_kernels.h"

namespace psflow::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;
// Rows each thread of a reduction reads at least before the rows are
// split over more blocks, and the most row tiles (blocks along y).
constexpr int64_t kPasses = 16;
constexpr int64_t kMaxTiles = 512;
// Rows each thread of the element-wise kernels handles, about.
constexpr int64_t kApplyPasses = 4;
constexpr int64_t kMaxGridY = 65535;

// How a block of kThreads covers x[rows x channels]: thread t handles
// channel (blockIdx.x * tile + t % tile) in rows t / tile, t / tile +
// rows_per_pass, ... of its row tile, so a block reads rows_per_pass
// whole rows (tile == channels) or a contiguous slice of each row per
// step (coalesced either way), and a thread's channel never changes (its
// per-channel values stay in registers; no division per element). With
// the 12-32 channels of a small CNN, a pass covers 8-21 rows.
struct Layout {
  int tile;           // channels per block, <= kThreads
  int rows_per_pass;  // kThreads / tile
  int64_t channel_tiles;
  int64_t row_tiles;  // reductions: blocks along y, each of tile_rows rows
  int64_t tile_rows;
};

Layout MakeLayout(int64_t rows, int64_t channels) {
  Layout l;
  l.tile = static_cast<int>(std::min<int64_t>(channels, kThreads));
  l.rows_per_pass = kThreads / l.tile;
  l.channel_tiles = (channels + l.tile - 1) / l.tile;
  const int64_t min_rows = l.rows_per_pass * kPasses;
  l.row_tiles =
      std::clamp<int64_t>((rows + min_rows - 1) / min_rows, 1, kMaxTiles);
  l.tile_rows = std::max<int64_t>((rows + l.row_tiles - 1) / l.row_tiles, 1);
  l.row_tiles = std::max<int64_t>((rows + l.tile_rows - 1) / l.tile_rows, 1);
  return l;
}

// Rows in row tile k.
__host__ __device__ __forceinline__ int64_t TileCount(const Layout& l,
                                                      int64_t rows, int64_t k) {
  const int64_t begin = k * l.tile_rows;
  return (rows < begin + l.tile_rows ? rows : begin + l.tile_rows) - begin;
}

// Chan et al.'s merge of two (count, mean, sum of squared deviations)
// summaries into the first.
template <typename T>
__device__ __forceinline__ void Merge(T& n, T& mean, T& m2, T nb, T mean_b,
                                      T m2_b) {
  if (nb == 0) return;
  const T total = n + nb;
  const T d = mean_b - mean;
  mean += d * (nb / total);
  m2 += m2_b + d * d * (n * nb / total);
  n = total;
}

// One block per (channel tile, row tile): Welford per thread over its
// rows, then a shared-memory tree over the block's row slices (pairs
// (r, r + 1), then (r, r + 2), ...: a fixed order). Writes each channel's
// (mean, m2) of the row tile to partial[(row tile * channels + ch) * 2].
__global__ void MomentsPartialKernel(int64_t rows, int64_t channels, Layout l,
                                     const float* __restrict__ x,
                                     float* __restrict__ partial) {
  __shared__ float s_n[kThreads], s_mean[kThreads], s_m2[kThreads];
  const int t = threadIdx.x;
  const int slice = t / l.tile;
  const int64_t ch = blockIdx.x * static_cast<int64_t>(l.tile) + t % l.tile;
  const bool active = slice < l.rows_per_pass && ch < channels;
  float n = 0.0f, mean = 0.0f, m2 = 0.0f;
  if (active) {
    const int64_t begin = blockIdx.y * l.tile_rows;
    const int64_t end = begin + TileCount(l, rows, blockIdx.y);
    for (int64_t r = begin + slice; r < end; r += l.rows_per_pass) {
      const float v = x[r * channels + ch];
      n += 1.0f;
      const float d = v - mean;
      mean += d / n;
      m2 += d * (v - mean);
    }
  }
  s_n[t] = n;
  s_mean[t] = mean;
  s_m2[t] = m2;
  __syncthreads();
  for (int s = 1; s < l.rows_per_pass; s *= 2) {
    if (active && slice % (2 * s) == 0 && slice + s < l.rows_per_pass) {
      const int u = t + s * l.tile;
      Merge(s_n[t], s_mean[t], s_m2[t], s_n[u], s_mean[u], s_m2[u]);
    }
    __syncthreads();
  }
  if (active && slice == 0) {
    float* out = partial + (blockIdx.y * channels + ch) * 2;
    out[0] = s_mean[t];
    out[1] = s_m2[t];
  }
}

// One warp per channel merges the row tiles' summaries in double: lane j
// takes tiles j, j + 32, ... in order, then a shuffle tree (fixed order).
__global__ void MomentsFinishKernel(int64_t rows, int64_t channels, Layout l,
                                    const float* __restrict__ partial,
                                    float* __restrict__ mean_out,
                                    float* __restrict__ var_out) {
  const int64_t ch = blockIdx.x;
  const int lane = threadIdx.x;
  double n = 0, mean = 0, m2 = 0;
  for (int64_t k = lane; k < l.row_tiles; k += kWarp) {
    const float* p = partial + (k * channels + ch) * 2;
    Merge<double>(n, mean, m2, static_cast<double>(TileCount(l, rows, k)), p[0],
                  p[1]);
  }
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const double nb = __shfl_down_sync(kFullMask, n, offset);
    const double mean_b = __shfl_down_sync(kFullMask, mean, offset);
    const double m2_b = __shfl_down_sync(kFullMask, m2, offset);
    Merge(n, mean, m2, nb, mean_b, m2_b);
  }
  if (lane == 0) {
    mean_out[ch] = static_cast<float>(mean);
    var_out[ch] = static_cast<float>(m2 / static_cast<double>(rows));
  }
}

__device__ __forceinline__ float InvStd(float var, float epsilon) {
  return 1.0f / sqrtf(var + epsilon);
}

// y may be x: no __restrict__ on them; each element is read, then written,
// by one thread.
__global__ void BatchNormApplyKernel(int64_t rows, int64_t channels, Layout l,
                                     const float* x,
                                     const float* __restrict__ mean,
                                     const float* __restrict__ var,
                                     float epsilon,
                                     const float* __restrict__ gamma,
                                     const float* __restrict__ beta, float* y) {
  const int slice = threadIdx.x / l.tile;
  const int64_t ch =
      blockIdx.x * static_cast<int64_t>(l.tile) + threadIdx.x % l.tile;
  if (slice >= l.rows_per_pass || ch >= channels) return;
  // y = x * scale + shift, as the CPU backend computes it.
  const float scale =
      (gamma != nullptr ? gamma[ch] : 1.0f) * InvStd(var[ch], epsilon);
  const float shift = (beta != nullptr ? beta[ch] : 0.0f) - mean[ch] * scale;
  const int64_t step = static_cast<int64_t>(gridDim.y) * l.rows_per_pass;
  for (int64_t r = blockIdx.y * static_cast<int64_t>(l.rows_per_pass) + slice;
       r < rows; r += step) {
    const int64_t i = r * channels + ch;
    y[i] = x[i] * scale + shift;
  }
}

// Batch norm backward, first step: per (channel tile, row tile) block,
// sum(dy) and sum(dy * x_hat) per channel (float per thread, shared-memory
// tree in a fixed order) into partial[(row tile * channels + ch) * 2].
__global__ void BatchNormSumsKernel(int64_t rows, int64_t channels, Layout l,
                                    const float* __restrict__ x,
                                    const float* __restrict__ mean,
                                    const float* __restrict__ var,
                                    float epsilon, const float* dy,
                                    float* __restrict__ partial) {
  __shared__ float s_dy[kThreads], s_dy_xhat[kThreads];
  const int t = threadIdx.x;
  const int slice = t / l.tile;
  const int64_t ch = blockIdx.x * static_cast<int64_t>(l.tile) + t % l.tile;
  const bool active = slice < l.rows_per_pass && ch < channels;
  float sum_dy = 0.0f, sum_dy_xhat = 0.0f;
  if (active) {
    const float m = mean[ch], inv_std = InvStd(var[ch], epsilon);
    const int64_t begin = blockIdx.y * l.tile_rows;
    const int64_t end = begin + TileCount(l, rows, blockIdx.y);
    for (int64_t r = begin + slice; r < end; r += l.rows_per_pass) {
      const int64_t i = r * channels + ch;
      const float g = dy[i];
      sum_dy += g;
      sum_dy_xhat += g * ((x[i] - m) * inv_std);
    }
  }
  s_dy[t] = sum_dy;
  s_dy_xhat[t] = sum_dy_xhat;
  __syncthreads();
  for (int s = 1; s < l.rows_per_pass; s *= 2) {
    if (active && slice % (2 * s) == 0 && slice + s < l.rows_per_pass) {
      s_dy[t] += s_dy[t + s * l.tile];
      s_dy_xhat[t] += s_dy_xhat[t + s * l.tile];
    }
    __syncthreads();
  }
  if (active && slice == 0) {
    float* out = partial + (blockIdx.y * channels + ch) * 2;
    out[0] = s_dy[t];
    out[1] = s_dy_xhat[t];
  }
}

// Second step: one warp per channel adds the row tiles in double (lane j
// takes tiles j, j + 32, ..., then a shuffle tree), writes dgamma/dbeta
// and the per-channel terms of dx: coef[ch * 4 + {0, 1, 2, 3}] = inv_std,
// gamma * inv_std, sum(dy) / N, sum(dy * x_hat) / N.
__global__ void BatchNormFinishKernel(
    int64_t rows, int64_t channels, Layout l, const float* __restrict__ var,
    float epsilon, const float* __restrict__ gamma,
    const float* __restrict__ partial, float* __restrict__ dgamma,
    float* __restrict__ dbeta, float* __restrict__ coef) {
  const int64_t ch = blockIdx.x;
  const int lane = threadIdx.x;
  double sum_dy = 0, sum_dy_xhat = 0;
  for (int64_t k = lane; k < l.row_tiles; k += kWarp) {
    sum_dy += partial[(k * channels + ch) * 2];
    sum_dy_xhat += partial[(k * channels + ch) * 2 + 1];
  }
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    sum_dy += __shfl_down_sync(kFullMask, sum_dy, offset);
    sum_dy_xhat += __shfl_down_sync(kFullMask, sum_dy_xhat, offset);
  }
  if (lane != 0) return;
  if (dgamma != nullptr) dgamma[ch] = static_cast<float>(sum_dy_xhat);
  if (dbeta != nullptr) dbeta[ch] = static_cast<float>(sum_dy);
  const float inv_std = InvStd(var[ch], epsilon);
  const double count = static_cast<double>(rows);
  float* c = coef + ch * 4;
  c[0] = inv_std;
  c[1] = (gamma != nullptr ? gamma[ch] : 1.0f) * inv_std;
  c[2] = static_cast<float>(sum_dy / count);
  c[3] = static_cast<float>(sum_dy_xhat / count);
}

// Third step, element-wise: dx = gamma * inv_std * (dy - mean(dy) - x_hat *
// mean(dy * x_hat)). dx may be dy: no __restrict__ on the data arrays.
__global__ void BatchNormGradKernel(int64_t rows, int64_t channels, Layout l,
                                    const float* x,
                                    const float* __restrict__ mean,
                                    const float* __restrict__ coef,
                                    const float* dy, float* dx) {
  const int slice = threadIdx.x / l.tile;
  const int64_t ch =
      blockIdx.x * static_cast<int64_t>(l.tile) + threadIdx.x % l.tile;
  if (slice >= l.rows_per_pass || ch >= channels) return;
  const float m = mean[ch], inv_std = coef[ch * 4], k = coef[ch * 4 + 1];
  const float mean_dy = coef[ch * 4 + 2], mean_dy_xhat = coef[ch * 4 + 3];
  const int64_t step = static_cast<int64_t>(gridDim.y) * l.rows_per_pass;
  for (int64_t r = blockIdx.y * static_cast<int64_t>(l.rows_per_pass) + slice;
       r < rows; r += step) {
    const int64_t i = r * channels + ch;
    const float x_hat = (x[i] - m) * inv_std;
    dx[i] = k * (dy[i] - mean_dy - x_hat * mean_dy_xhat);
  }
}

// The element-wise kernels' grid: every channel tile, and enough row
// passes that each thread handles about kApplyPasses rows.
dim3 ElementwiseGrid(const Layout& l, int64_t rows) {
  const int64_t rows_per_block = l.rows_per_pass * kApplyPasses;
  return dim3(static_cast<unsigned>(l.channel_tiles),
              static_cast<unsigned>(std::clamp<int64_t>(
                  (rows + rows_per_block - 1) / rows_per_block, 1, kMaxGridY)));
}

dim3 ReductionGrid(const Layout& l) {
  return dim3(static_cast<unsigned>(l.channel_tiles),
              static_cast<unsigned>(l.row_tiles));
}

}  // namespace

int64_t BatchNormScratchFloats(int64_t rows, int64_t channels) {
  if (rows <= 0 || channels <= 0) return 0;
  return MakeLayout(rows, channels).row_tiles * channels * 2 + channels * 4;
}

cudaError_t LaunchChannelMoments(int64_t rows, int64_t channels, const float* x,
                                 float* mean, float* var, float* scratch,
                                 cudaStream_t stream) {
  if (channels <= 0) return cudaSuccess;
  if (rows <= 0) {
    const size_t bytes = channels * sizeof(float);
    cudaError_t error = cudaMemsetAsync(mean, 0, bytes, stream);
    if (error != cudaSuccess) return error;
    return cudaMemsetAsync(var, 0, bytes, stream);
  }
  const Layout l = MakeLayout(rows, channels);
  MomentsPartialKernel<<<ReductionGrid(l), kThreads, 0, stream>>>(
      rows, channels, l, x, scratch);
  MomentsFinishKernel<<<static_cast<unsigned>(channels), kWarp, 0, stream>>>(
      rows, channels, l, scratch, mean, var);
  return cudaGetLastError();
}

cudaError_t LaunchBatchNormApply(int64_t rows, int64_t channels, const float* x,
                                 const float* mean, const float* var,
                                 float epsilon, const float* gamma,
                                 const float* beta, float* y,
                                 cudaStream_t stream) {
  if (rows <= 0 || channels <= 0) return cudaSuccess;
  const Layout l = MakeLayout(rows, channels);
  BatchNormApplyKernel<<<ElementwiseGrid(l, rows), kThreads, 0, stream>>>(
      rows, channels, l, x, mean, var, epsilon, gamma, beta, y);
  return cudaGetLastError();
}

cudaError_t LaunchBatchNormBackward(int64_t rows, int64_t channels,
                                    const float* x, const float* mean,
                                    const float* var, float epsilon,
                                    const float* gamma, const float* dy,
                                    float* dx, float* dgamma, float* dbeta,
                                    float* scratch, cudaStream_t stream) {
  if (channels <= 0) return cudaSuccess;
  if (rows <= 0) {
    // Empty sums; dx has no elements.
    const size_t bytes = channels * sizeof(float);
    for (float* sums : {dgamma, dbeta}) {
      if (sums == nullptr) continue;
      const cudaError_t error = cudaMemsetAsync(sums, 0, bytes, stream);
      if (error != cudaSuccess) return error;
    }
    return cudaSuccess;
  }
  const Layout l = MakeLayout(rows, channels);
  float* partial = scratch;
  float* coef = scratch + l.row_tiles * channels * 2;
  BatchNormSumsKernel<<<ReductionGrid(l), kThreads, 0, stream>>>(
      rows, channels, l, x, mean, var, epsilon, dy, partial);
  BatchNormFinishKernel<<<static_cast<unsigned>(channels), kWarp, 0, stream>>>(
      rows, channels, l, var, epsilon, gamma, partial, dgamma, dbeta, coef);
  BatchNormGradKernel<<<ElementwiseGrid(l, rows), kThreads, 0, stream>>>(
      rows, channels, l, x, mean, coef, dy, dx);
  return cudaGetLastError();
}

}  // namespace psflow::cuda
