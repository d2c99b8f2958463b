// The CPU backend's convolutions (Device::ConvForward / ConvBackward) as
// im2col + GEMM over a few images at a time. The whole batch's patch
// matrix is many times the input (36x for a 6x6 window at stride 2, 16 MB
// for the convnet's second layer at batch 64): built at once, it is
// written to memory and read back by the product, which cost the
// single-threaded convnet about a fifth of its step. A group's patches
// (about 512 KiB) stay in the core's cache between im2col and GEMM.
//
// Groups, and the blocks of groups whose kernel gradients are summed
// before the blocks' sums are added in block order, depend only on the
// geometry and the batch, not on the thread count: every thread count
// gives bitwise the same result. Arguments are checked by the caller.
#ifndef PSFLOW_MODEL_DEVICE_CPU_CPU_CONV_H_
#define PSFLOW_MODEL_DEVICE_CPU_CPU_CONV_H_

#include <cstdint>
#include <vector>

#include "model/device/cpu/cpu_thread_pool.h"
#include "model/device/device.h"

namespace psflow::cpu {

class CpuConvolution {
 public:
  explicit CpuConvolution(CpuThreadPool* pool);

  // y[g.patch_rows() x filters] = cols(x) * kernel[g.patch_cols() x
  // filters].
  void Forward(const WindowGeometry& g, int64_t filters, const float* x,
               const float* kernel, float* y);

  // dkernel = cols(x)^T dy; dx = Col2Im(dy kernel^T) unless dx is null.
  void Backward(const WindowGeometry& g, int64_t filters, const float* x,
                const float* dy, const float* kernel, float* dkernel,
                float* dx);

  // Whether a batch's patch matrix is large enough to be built a group at
  // a time: above kWholeBatchFloats. A smaller one stays in the caches
  // whole, and one product over it splits over the threads better (the
  // first layer's 9-wide patches took twice as long in groups).
  static bool WorthGrouping(const WindowGeometry& g) {
    return g.patch_rows() * g.patch_cols() > kWholeBatchFloats;
  }

  // Images per group for `g`: as many as keep a group's patches within
  // kGroupFloats, at least one.
  static int64_t ImagesPerGroup(const WindowGeometry& g);

  // Floats of one group's patch matrix aimed for (512 KiB: half the L2
  // cache of current server cores, the backward pass's patch gradient
  // taking the other half; two of the convnet's second-layer images, whose
  // products ran 5% faster than with one).
  static constexpr int64_t kGroupFloats = kCpuConvolutionGroupFloats;
  static constexpr int64_t kWholeBatchFloats = kCpuWholeConvolutionFloats;
  // Kernel-gradient partial sums at most (each the kernel's size).
  static constexpr int64_t kMaxBlocks = kCpuConvolutionMaxPartials;

 private:
  // Chunk `chunk`'s buffer of at least `floats` floats.
  float* Scratch(std::vector<std::vector<float>>& buffers, int chunk,
                 int64_t floats);

  CpuThreadPool* const pool_;
  // One per pool thread (ParallelFor's chunk index), grown on demand.
  std::vector<std::vector<float>> cols_, dcols_;
  std::vector<float> partials_;  // blocks x kernel
};

}  // namespace psflow::cpu

#endif  // PSFLOW_MODEL_DEVICE_CPU_CPU_CONV_H_
