#include "model/device/cpu/cpu_conv.h"

#include <cblas.h>

#include <algorithm>

#include "model/device/cpu/cpu_layer_ops.h"

namespace psflow::cpu {
namespace {

// A group of images [first, first + count) of the batch `g`: its geometry
// (n = count) and where its input and its rows start.
struct Group {
  WindowGeometry g;
  int64_t first_row = 0;     // of the patch matrix, y and dy
  int64_t input_offset = 0;  // floats into x and dx
};

Group GroupAt(const WindowGeometry& batch, int64_t per_group, int64_t index) {
  Group group;
  const int64_t first = index * per_group;
  group.g = batch;
  group.g.n = std::min(per_group, batch.n - first);
  group.first_row = first * batch.oh * batch.ow;
  group.input_offset = first * batch.h * batch.w * batch.c;
  return group;
}

}  // namespace

CpuConvolution::CpuConvolution(CpuThreadPool* pool)
    : pool_(pool), cols_(pool->threads()), dcols_(pool->threads()) {}

int64_t CpuConvolution::ImagesPerGroup(const WindowGeometry& g) {
  const int64_t per_image = std::max<int64_t>(1, g.oh * g.ow * g.patch_cols());
  return std::max<int64_t>(1, kGroupFloats / per_image);
}

float* CpuConvolution::Scratch(std::vector<std::vector<float>>& buffers,
                               int chunk, int64_t floats) {
  std::vector<float>& buffer = buffers[static_cast<size_t>(chunk)];
  if (static_cast<int64_t>(buffer.size()) < floats) {
    buffer.resize(static_cast<size_t>(floats));
  }
  return buffer.data();
}

void CpuConvolution::Forward(const WindowGeometry& g, int64_t filters,
                             const float* x, const float* kernel, float* y) {
  const int64_t k = g.patch_cols(), rows = g.patch_rows();
  if (rows == 0 || filters == 0) return;
  if (k == 0) {  // no window elements (no channels): a zero product
    std::fill_n(y, rows * filters, 0.0f);
    return;
  }
  const int64_t per_group = ImagesPerGroup(g);
  const int64_t groups = (g.n + per_group - 1) / per_group;
  pool_->ParallelFor(groups, 1, [&](int chunk, int64_t first, int64_t last) {
    float* cols = Scratch(cols_, chunk, per_group * g.oh * g.ow * k);
    for (int64_t index = first; index < last; ++index) {
      const Group group = GroupAt(g, per_group, index);
      Im2ColImages(group.g, x + group.input_offset, cols, 0, group.g.n);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans,
                  group.g.patch_rows(), filters, k, 1.0f, cols, k, kernel,
                  filters, 0.0f, y + group.first_row * filters, filters);
    }
  });
}

void CpuConvolution::Backward(const WindowGeometry& g, int64_t filters,
                              const float* x, const float* dy,
                              const float* kernel, float* dkernel, float* dx) {
  const int64_t k = g.patch_cols(), rows = g.patch_rows();
  const int64_t kernel_size = k * filters;
  if (rows == 0 || filters == 0 || k == 0) {
    // No products: the gradients are zero.
    std::fill_n(dkernel, kernel_size, 0.0f);
    if (dx != nullptr) std::fill_n(dx, g.input_size(), 0.0f);
    return;
  }
  const int64_t per_group = ImagesPerGroup(g);
  const int64_t groups = (g.n + per_group - 1) / per_group;
  const int64_t blocks = std::min(groups, kMaxBlocks);
  // Block b's groups sum into its partial (the kernel gradient itself when
  // there is one block).
  if (blocks > 1 &&
      static_cast<int64_t>(partials_.size()) < blocks * kernel_size) {
    partials_.resize(static_cast<size_t>(blocks * kernel_size));
  }
  const int64_t group_floats = per_group * g.oh * g.ow * k;
  pool_->ParallelFor(blocks, 1, [&](int chunk, int64_t first, int64_t last) {
    float* cols = Scratch(cols_, chunk, group_floats);
    float* dcols =
        dx != nullptr ? Scratch(dcols_, chunk, group_floats) : nullptr;
    for (int64_t block = first; block < last; ++block) {
      float* partial =
          blocks > 1 ? partials_.data() + block * kernel_size : dkernel;
      const int64_t begin = groups * block / blocks;
      const int64_t end = groups * (block + 1) / blocks;
      for (int64_t index = begin; index < end; ++index) {
        const Group group = GroupAt(g, per_group, index);
        const int64_t group_rows = group.g.patch_rows();
        const float* group_dy = dy + group.first_row * filters;
        Im2ColImages(group.g, x + group.input_offset, cols, 0, group.g.n);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, filters,
                    group_rows, 1.0f, cols, k, group_dy, filters,
                    index == begin ? 0.0f : 1.0f, partial, filters);
        if (dx == nullptr) continue;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, group_rows, k,
                    filters, 1.0f, group_dy, filters, kernel, filters, 0.0f,
                    dcols, k);
        Col2ImImages(group.g, dcols, dx + group.input_offset, 0, group.g.n);
      }
    }
  });
  if (blocks == 1) return;
  // The blocks' partials added in block order, element by element.
  const float* partials = partials_.data();
  pool_->ParallelFor(kernel_size, 16384, [&](int, int64_t begin, int64_t end) {
    std::copy(partials + begin, partials + end, dkernel + begin);
    for (int64_t b = 1; b < blocks; ++b) {
      const float* __restrict__ from = partials + b * kernel_size;
      float* __restrict__ to = dkernel;
      for (int64_t i = begin; i < end; ++i) to[i] += from[i];
    }
  });
}

}  // namespace psflow::cpu
