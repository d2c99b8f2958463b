// Kernels of the sliding-window layer ops over NHWC images: im2col and its
// adjoint col2im (convolutions as GEMMs), max and average pooling and
// their backward. Plain C++ interface in front of the .cu file; see
// activation_kernels.h for the conventions. Geometries are validated by
// the caller (CheckWindow in model/device/device_checks.h).
//
// Every output element is written by exactly one thread, which gathers
// the inputs it depends on in a fixed order (no atomics): results are
// deterministic, and Col2Im and PoolBackward overwrite their outputs.
#ifndef PSFLOW_MODEL_DEVICE_CUDA_WINDOW_KERNELS_H_
#define PSFLOW_MODEL_DEVICE_CUDA_WINDOW_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace psflow::cuda {

// Mirrors psflow::WindowGeometry (model/device/device.h), which lives in a
// header nvcc does not see; the same fields and meaning.
struct KernelWindow {
  int64_t n, h, w, c;
  int64_t kh, kw;
  int64_t sh, sw;
  int64_t pad_top, pad_left;
  int64_t oh, ow;
};

// Mirrors psflow::PoolKind.
enum class KernelPool : int { kMax, kAverage };

// cols[n*oh*ow x kh*kw*c]: each output position's window in (ky, kx,
// channel) order, zeros over the padding.
cudaError_t LaunchIm2Col(const KernelWindow& g, const float* x, float* cols,
                         cudaStream_t stream);

// x[n*h*w*c] = for each input value, the sum of the cols entries that
// Im2Col copies it to, in output-position order (the CPU backend's order).
cudaError_t LaunchCol2Im(const KernelWindow& g, const float* cols, float* x,
                         cudaStream_t stream);

// y[n*oh*ow*c]: each window's max (NaN inputs are skipped, as by the CPU
// backend's `v > max` scan from -inf) or mean over its in-image elements.
cudaError_t LaunchPool(KernelPool kind, const KernelWindow& g, const float* x,
                       float* y, cudaStream_t stream);

// Bytes of scratch LaunchPoolBackward needs for `kind` over `g` (0 for
// average pooling).
int64_t PoolBackwardScratchBytes(KernelPool kind, const KernelWindow& g);

// dx[n*h*w*c] from dy[n*oh*ow*c]. Max: each window's gradient goes to its
// first in-image element (in (ky, kx) order) equal to y; average: spread
// over the window's in-image elements. `scratch` holds
// PoolBackwardScratchBytes(kind, g) bytes (max: each window's chosen
// element, found by a first kernel).
cudaError_t LaunchPoolBackward(KernelPool kind, const KernelWindow& g,
                               const float* x, const float* y, const float* dy,
                               float* dx, void* scratch, cudaStream_t stream);

}  // namespace psflow::cuda

#endif  // PSFLOW_MODEL_DEVICE_CUDA_WINDOW_KERNELS_H_
