#include <algorithm>
#include <cmath>

#include "model/device/cuda/window_kernels.h"

namespace psflow::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;  // grid-stride loops beyond

// The geometry in the index type the kernels compute with: 32-bit where
// every index fits (the usual case: 64-bit division costs several times
// more), 64-bit otherwise.
template <typename Index>
struct Window {
  Index n, h, w, c, kh, kw, sh, sw, pad_top, pad_left, oh, ow;
};

template <typename Index>
Window<Index> Narrow(const KernelWindow& g) {
  return Window<Index>{
      static_cast<Index>(g.n),       static_cast<Index>(g.h),
      static_cast<Index>(g.w),       static_cast<Index>(g.c),
      static_cast<Index>(g.kh),      static_cast<Index>(g.kw),
      static_cast<Index>(g.sh),      static_cast<Index>(g.sw),
      static_cast<Index>(g.pad_top), static_cast<Index>(g.pad_left),
      static_cast<Index>(g.oh),      static_cast<Index>(g.ow)};
}

int64_t InputSize(const KernelWindow& g) { return g.n * g.h * g.w * g.c; }
int64_t OutputSize(const KernelWindow& g) { return g.n * g.oh * g.ow * g.c; }
int64_t PatchSize(const KernelWindow& g) {
  return g.n * g.oh * g.ow * g.kh * g.kw * g.c;
}

// Whether every index and intermediate (padded coordinates up to h + kh)
// fits a signed 32-bit integer, with room to spare.
bool Fits32(const KernelWindow& g) {
  constexpr int64_t kLimit = int64_t{1} << 30;
  return InputSize(g) < kLimit && OutputSize(g) < kLimit &&
         PatchSize(g) < kLimit && g.h + g.kh < kLimit && g.w + g.kw < kLimit;
}

unsigned Blocks(int64_t n) {
  return static_cast<unsigned>(
      std::min((n + kThreads - 1) / kThreads, kMaxBlocks));
}

// Grid-stride loop over [0, total); the counter is 64-bit so that it
// cannot wrap past the end, the body's index is Index.
#define PSFLOW_FOR_EACH_INDEX(i, total)                                       \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; \
       i < (total); i += static_cast<int64_t>(gridDim.x) * kThreads)

// The window positions o (along one axis) whose window [o*s - pad, o*s -
// pad + k) holds padded coordinate p = input coordinate + pad: o in
// [lo, hi] (empty when lo > hi).
template <typename Index>
__device__ __forceinline__ void Covering(Index p, Index k, Index s,
                                         Index positions, Index& lo,
                                         Index& hi) {
  lo = p >= k ? (p - k) / s + 1 : 0;
  hi = min(p / s, positions - 1);
}

// The part of output position (oy, ox)'s window inside the image: input
// rows [y0, y1), columns [x0, x1); (top, left) is the window's corner.
template <typename Index>
struct Clip {
  Index top, left, y0, y1, x0, x1;
};

template <typename Index>
__device__ __forceinline__ Clip<Index> ClipWindow(const Window<Index>& g,
                                                  Index oy, Index ox) {
  Clip<Index> c;
  c.top = oy * g.sh - g.pad_top;
  c.left = ox * g.sw - g.pad_left;
  c.y0 = max(c.top, Index{0});
  c.y1 = min(c.top + g.kh, g.h);
  c.x0 = max(c.left, Index{0});
  c.x1 = min(c.left + g.kw, g.w);
  return c;
}

// One thread per cols element: consecutive threads write consecutive
// columns, and read consecutive channels of the input.
template <typename Index>
__global__ void Im2ColKernel(Window<Index> g, int64_t total,
                             const float* __restrict__ x,
                             float* __restrict__ cols) {
  const Index patch_cols = g.kh * g.kw * g.c;
  PSFLOW_FOR_EACH_INDEX(i, total) {
    const Index idx = static_cast<Index>(i);
    const Index col = idx % patch_cols, row = idx / patch_cols;
    const Index ch = col % g.c, k = col / g.c;
    const Index kx = k % g.kw, ky = k / g.kw;
    const Index ox = row % g.ow, t = row / g.ow;
    const Index oy = t % g.oh, img = t / g.oh;
    const Index iy = oy * g.sh - g.pad_top + ky;
    const Index ix = ox * g.sw - g.pad_left + kx;
    const bool inside = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;
    cols[i] = inside ? x[((img * g.h + iy) * g.w + ix) * g.c + ch] : 0.0f;
  }
}

// One thread per input element: the sum over the windows that read it, in
// (oy, ox) order, starting from zero, which is the order in which the CPU
// backend's scatter adds them (so the two agree bit for bit).
template <typename Index>
__global__ void Col2ImKernel(Window<Index> g, int64_t total,
                             const float* __restrict__ cols,
                             float* __restrict__ x) {
  const Index patch_cols = g.kh * g.kw * g.c;
  PSFLOW_FOR_EACH_INDEX(i, total) {
    const Index idx = static_cast<Index>(i);
    const Index ch = idx % g.c, t = idx / g.c;
    const Index ix = t % g.w, t2 = t / g.w;
    const Index iy = t2 % g.h, img = t2 / g.h;
    const Index py = iy + g.pad_top, px = ix + g.pad_left;
    Index oy_lo, oy_hi, ox_lo, ox_hi;
    Covering(py, g.kh, g.sh, g.oh, oy_lo, oy_hi);
    Covering(px, g.kw, g.sw, g.ow, ox_lo, ox_hi);
    float sum = 0.0f;
    for (Index oy = oy_lo; oy <= oy_hi; ++oy) {
      const Index ky = py - oy * g.sh;
      for (Index ox = ox_lo; ox <= ox_hi; ++ox) {
        const Index kx = px - ox * g.sw;
        const Index row = (img * g.oh + oy) * g.ow + ox;
        sum += cols[row * patch_cols + (ky * g.kw + kx) * g.c + ch];
      }
    }
    x[i] = sum;
  }
}

// One thread per output element; consecutive threads read consecutive
// channels.
template <typename Index, KernelPool kKind>
__global__ void PoolKernel(Window<Index> g, int64_t total,
                           const float* __restrict__ x, float* __restrict__ y) {
  PSFLOW_FOR_EACH_INDEX(i, total) {
    const Index idx = static_cast<Index>(i);
    const Index ch = idx % g.c, t = idx / g.c;
    const Index ox = t % g.ow, t2 = t / g.ow;
    const Index oy = t2 % g.oh, img = t2 / g.oh;
    const Clip<Index> w = ClipWindow(g, oy, ox);
    const float* image = x + img * g.h * g.w * g.c + ch;
    if constexpr (kKind == KernelPool::kMax) {
      float m = -INFINITY;
      for (Index iy = w.y0; iy < w.y1; ++iy) {
        for (Index ix = w.x0; ix < w.x1; ++ix) {
          const float v = image[(iy * g.w + ix) * g.c];
          m = v > m ? v : m;
        }
      }
      y[i] = m;
    } else {
      float sum = 0.0f;
      for (Index iy = w.y0; iy < w.y1; ++iy) {
        for (Index ix = w.x0; ix < w.x1; ++ix) {
          sum += image[(iy * g.w + ix) * g.c];
        }
      }
      // Every window holds at least one in-image element (CheckWindow).
      y[i] = sum / static_cast<float>((w.y1 - w.y0) * (w.x1 - w.x0));
    }
  }
}

// Max pooling's backward, first step: per output element, the window
// offset (ky * kw + kx) of its first in-image element equal to y, or -1
// (y NaN or not from this x).
template <typename Index>
__global__ void PoolArgMaxKernel(Window<Index> g, int64_t total,
                                 const float* __restrict__ x,
                                 const float* __restrict__ y,
                                 Index* __restrict__ first) {
  PSFLOW_FOR_EACH_INDEX(i, total) {
    const Index idx = static_cast<Index>(i);
    const Index ch = idx % g.c, t = idx / g.c;
    const Index ox = t % g.ow, t2 = t / g.ow;
    const Index oy = t2 % g.oh, img = t2 / g.oh;
    const Clip<Index> w = ClipWindow(g, oy, ox);
    const float* image = x + img * g.h * g.w * g.c + ch;
    const float target = y[i];
    Index found = -1;
    for (Index iy = w.y0; iy < w.y1 && found < 0; ++iy) {
      for (Index ix = w.x0; ix < w.x1; ++ix) {
        if (image[(iy * g.w + ix) * g.c] == target) {
          found = (iy - w.top) * g.kw + (ix - w.left);
          break;
        }
      }
    }
    first[i] = found;
  }
}

// Second step (max) or the whole backward (average): one thread per input
// element gathers the gradient of every window that holds it, in (oy, ox)
// order from zero, as the CPU backend's scatter adds them.
template <typename Index, KernelPool kKind>
__global__ void PoolBackwardKernel(Window<Index> g, int64_t total,
                                   const float* __restrict__ dy,
                                   const Index* __restrict__ first,
                                   float* __restrict__ dx) {
  PSFLOW_FOR_EACH_INDEX(i, total) {
    const Index idx = static_cast<Index>(i);
    const Index ch = idx % g.c, t = idx / g.c;
    const Index ix = t % g.w, t2 = t / g.w;
    const Index iy = t2 % g.h, img = t2 / g.h;
    const Index py = iy + g.pad_top, px = ix + g.pad_left;
    Index oy_lo, oy_hi, ox_lo, ox_hi;
    Covering(py, g.kh, g.sh, g.oh, oy_lo, oy_hi);
    Covering(px, g.kw, g.sw, g.ow, ox_lo, ox_hi);
    float sum = 0.0f;
    for (Index oy = oy_lo; oy <= oy_hi; ++oy) {
      const Index ky = py - oy * g.sh;
      for (Index ox = ox_lo; ox <= ox_hi; ++ox) {
        const Index o = ((img * g.oh + oy) * g.ow + ox) * g.c + ch;
        if constexpr (kKind == KernelPool::kMax) {
          if (first[o] == ky * g.kw + (px - ox * g.sw)) sum += dy[o];
        } else {
          const Clip<Index> w = ClipWindow(g, oy, ox);
          const float share =
              1.0f / static_cast<float>((w.y1 - w.y0) * (w.x1 - w.x0));
          // Rounded product, then the sum: no fused multiply-add, as on
          // the CPU.
          sum += __fmul_rn(dy[o], share);
        }
      }
    }
    dx[i] = sum;
  }
}

template <typename Index>
void Im2Col(const KernelWindow& g, const float* x, float* cols,
            cudaStream_t stream) {
  const int64_t total = PatchSize(g);
  Im2ColKernel<Index><<<Blocks(total), kThreads, 0, stream>>>(Narrow<Index>(g),
                                                              total, x, cols);
}

template <typename Index>
void Col2Im(const KernelWindow& g, const float* cols, float* x,
            cudaStream_t stream) {
  const int64_t total = InputSize(g);
  Col2ImKernel<Index><<<Blocks(total), kThreads, 0, stream>>>(Narrow<Index>(g),
                                                              total, cols, x);
}

template <typename Index>
void Pool(KernelPool kind, const KernelWindow& g, const float* x, float* y,
          cudaStream_t stream) {
  const int64_t total = OutputSize(g);
  if (kind == KernelPool::kMax) {
    PoolKernel<Index, KernelPool::kMax>
        <<<Blocks(total), kThreads, 0, stream>>>(Narrow<Index>(g), total, x, y);
  } else {
    PoolKernel<Index, KernelPool::kAverage>
        <<<Blocks(total), kThreads, 0, stream>>>(Narrow<Index>(g), total, x, y);
  }
}

template <typename Index>
void PoolBackward(KernelPool kind, const KernelWindow& g, const float* x,
                  const float* y, const float* dy, float* dx, void* scratch,
                  cudaStream_t stream) {
  const Window<Index> narrow = Narrow<Index>(g);
  const int64_t inputs = InputSize(g), outputs = OutputSize(g);
  if (kind == KernelPool::kMax) {
    Index* first = static_cast<Index*>(scratch);
    if (outputs > 0) {
      PoolArgMaxKernel<Index><<<Blocks(outputs), kThreads, 0, stream>>>(
          narrow, outputs, x, y, first);
    }
    PoolBackwardKernel<Index, KernelPool::kMax>
        <<<Blocks(inputs), kThreads, 0, stream>>>(narrow, inputs, dy, first,
                                                  dx);
  } else {
    PoolBackwardKernel<Index, KernelPool::kAverage>
        <<<Blocks(inputs), kThreads, 0, stream>>>(narrow, inputs, dy, nullptr,
                                                  dx);
  }
}

#undef PSFLOW_FOR_EACH_INDEX

}  // namespace

cudaError_t LaunchIm2Col(const KernelWindow& g, const float* x, float* cols,
                         cudaStream_t stream) {
  if (PatchSize(g) <= 0) return cudaSuccess;
  if (Fits32(g)) {
    Im2Col<int32_t>(g, x, cols, stream);
  } else {
    Im2Col<int64_t>(g, x, cols, stream);
  }
  return cudaGetLastError();
}

cudaError_t LaunchCol2Im(const KernelWindow& g, const float* cols, float* x,
                         cudaStream_t stream) {
  if (InputSize(g) <= 0) return cudaSuccess;
  if (Fits32(g)) {
    Col2Im<int32_t>(g, cols, x, stream);
  } else {
    Col2Im<int64_t>(g, cols, x, stream);
  }
  return cudaGetLastError();
}

cudaError_t LaunchPool(KernelPool kind, const KernelWindow& g, const float* x,
                       float* y, cudaStream_t stream) {
  if (OutputSize(g) <= 0) return cudaSuccess;
  if (Fits32(g)) {
    Pool<int32_t>(kind, g, x, y, stream);
  } else {
    Pool<int64_t>(kind, g, x, y, stream);
  }
  return cudaGetLastError();
}

int64_t PoolBackwardScratchBytes(KernelPool kind, const KernelWindow& g) {
  if (kind != KernelPool::kMax) return 0;
  return OutputSize(g) *
         static_cast<int64_t>(Fits32(g) ? sizeof(int32_t) : sizeof(int64_t));
}

cudaError_t LaunchPoolBackward(KernelPool kind, const KernelWindow& g,
                               const float* x, const float* y, const float* dy,
                               float* dx, void* scratch, cudaStream_t stream) {
  if (InputSize(g) <= 0) return cudaSuccess;
  if (Fits32(g)) {
    PoolBackward<int32_t>(kind, g, x, y, dy, dx, scratch, stream);
  } else {
    PoolBackward<int64_t>(kind, g, x, y, dy, dx, scratch, stream);
  }
  return cudaGetLastError();
}

}  // namespace psflow::cuda
