#include <algorithm>
#include <cfloat>
#include <climits>
#include <cstring>

#include "model/device/cuda/softmax_kernels.h"

namespace psflow::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = 8;  // one warp per row
constexpr int kReduceThreads = 512;
constexpr unsigned kFullMask = 0xffffffffu;

struct ArgMax {
  float value;
  int64_t index;
};

// The larger value; among equal values the lower index, as the CPU loop.
__device__ __forceinline__ ArgMax Better(ArgMax a, ArgMax b) {
  if (b.value > a.value || (b.value == a.value && b.index < a.index)) return b;
  return a;
}

__global__ void SoftmaxRowsKernel(
    int64_t rows, int64_t classes, const float* __restrict__ logits,
    const float* __restrict__ labels, float* __restrict__ grad,
    float* __restrict__ predictions, float* __restrict__ row_loss,
    float* __restrict__ row_correct, unsigned long long* bad_label) {
  const int lane = threadIdx.x % kWarp;
  const float scale = 1.0f / static_cast<float>(rows);
  for (int64_t row = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) +
                     threadIdx.x / kWarp;
       row < rows; row += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    const float* z = logits + row * classes;
    ArgMax best{-INFINITY, LLONG_MAX};
    for (int64_t c = lane; c < classes; c += kWarp) {
      best = Better(best, ArgMax{z[c], c});
    }
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      ArgMax other{__shfl_xor_sync(kFullMask, best.value, offset),
                   __shfl_xor_sync(kFullMask, best.index, offset)};
      best = Better(best, other);
    }
    if (best.index == LLONG_MAX) best.index = 0;  // a row of NaNs
    // log-sum-exp around the maximum keeps expf in range.
    float sum = 0.0f;
    for (int64_t c = lane; c < classes; c += kWarp)
      sum += expf(z[c] - best.value);
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      sum += __shfl_xor_sync(kFullMask, sum, offset);
    }
    const float log_sum = logf(sum) + best.value;

    const float raw = labels[row];
    const float class_id = truncf(raw);
    const bool valid =
        class_id >= 0.0f && class_id < static_cast<float>(classes);
    const int64_t label = valid ? static_cast<int64_t>(class_id) : -1;
    if (grad != nullptr) {
      float* g = grad + row * classes;
      for (int64_t c = lane; c < classes; c += kWarp) {
        g[c] = (expf(z[c] - log_sum) - (c == label ? 1.0f : 0.0f)) * scale;
      }
    }
    if (lane == 0) {
      predictions[row] = static_cast<float>(best.index);
      row_loss[row] = valid ? log_sum - z[label] : 0.0f;
      row_correct[row] = best.index == label ? 1.0f : 0.0f;
      if (!valid) {
        unsigned bits;
        memcpy(&bits, &raw, sizeof(bits));
        atomicMin(bad_label,
                  (static_cast<unsigned long long>(row) << 32) | bits);
      }
    }
  }
}

// One block: each thread adds a strided subset of rows in double, then a
// shared-memory tree in a fixed order.
__global__ void SumRowsKernel(int64_t rows, const float* __restrict__ row_loss,
                              const float* __restrict__ row_correct,
                              float* __restrict__ stats) {
  __shared__ double loss[kReduceThreads];
  __shared__ double correct[kReduceThreads];
  double l = 0, c = 0;
  for (int64_t r = threadIdx.x; r < rows; r += kReduceThreads) {
    l += row_loss[r];
    c += row_correct[r];
  }
  loss[threadIdx.x] = l;
  correct[threadIdx.x] = c;
  __syncthreads();
  for (int stride = kReduceThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      loss[threadIdx.x] += loss[threadIdx.x + stride];
      correct[threadIdx.x] += correct[threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    stats[0] = static_cast<float>(loss[0]);
    stats[1] = static_cast<float>(correct[0]);
  }
}

}  // namespace

float BadLabelValue(uint64_t word) {
  const uint32_t bits = static_cast<uint32_t>(word & 0xffffffffu);
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

cudaError_t LaunchSoftmaxCrossEntropy(int64_t rows, int64_t classes,
                                      const float* logits, const float* labels,
                                      float* grad, float* predictions,
                                      float* stats, float* scratch,
                                      unsigned long long* bad_label,
                                      cudaStream_t stream) {
  if (rows > 0) {
    const int64_t blocks =
        std::min<int64_t>((rows + kRowsPerBlock - 1) / kRowsPerBlock, 65535);
    SoftmaxRowsKernel<<<static_cast<unsigned>(blocks), kRowsPerBlock * kWarp, 0,
                        stream>>>(rows, classes, logits, labels, grad,
                                  predictions, scratch, scratch + rows,
                                  bad_label);
  }
  SumRowsKernel<<<1, kReduceThreads, 0, stream>>>(rows, scratch, scratch + rows,
                                                  stats);
  return cudaGetLastError();
}

}  // namespace psflow::cuda
