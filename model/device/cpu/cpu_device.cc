#include "model/device/cpu/cpu_device.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/device/cpu/cpu_conv.h"
#include "model/device/cpu/cpu_layer_ops.h"
#include "model/device/cpu/cpu_thread_pool.h"
#include "model/device/device_checks.h"
#include "model/device/dropout_hash.h"

namespace psflow {
namespace {

using cpu::CpuThreadPool;

// Element-wise chunks below this many floats are not worth a thread's
// wake-up; likewise GEMM parts below kMinGemmMacs multiply-adds.
constexpr int64_t kMinChunkElements = 16384;
constexpr int64_t kMinGemmMacs = 1 << 16;
// GEMM parts start at multiples of this many rows or columns of C, so
// every part but the last fills OpenBLAS's register blocks.
constexpr int64_t kGemmBlock = 16;

int64_t RowGrain(int64_t cols) {
  return std::max<int64_t>(1, kMinChunkElements / std::max<int64_t>(cols, 1));
}

// z = activation(z + bias) for rows [first, last) of z (cols columns).
void BiasActivateRows(int64_t first, int64_t last, int64_t cols,
                      const float* __restrict__ b, Activation activation,
                      float* z) {
  for (int64_t r = first; r < last; ++r) {
    float* __restrict__ row = z + r * cols;
    switch (activation) {
      case Activation::kNone:
        for (int64_t c = 0; c < cols; ++c) row[c] += b[c];
        break;
      case Activation::kRelu:
        for (int64_t c = 0; c < cols; ++c) {
          row[c] = std::max(row[c] + b[c], 0.0f);
        }
        break;
      case Activation::kTanh:
        for (int64_t c = 0; c < cols; ++c) row[c] = std::tanh(row[c] + b[c]);
        break;
      case Activation::kSigmoid:
        for (int64_t c = 0; c < cols; ++c) {
          row[c] = 1.0f / (1.0f + std::exp(-(row[c] + b[c])));
        }
        break;
    }
  }
}

// g *= activation'(.) at elements [begin, end), from the activation's
// outputs a.
void ActivationGradient(int64_t begin, int64_t end, Activation activation,
                        const float* __restrict__ a, float* __restrict__ g) {
  switch (activation) {
    case Activation::kNone:
      break;
    case Activation::kRelu:
      for (int64_t i = begin; i < end; ++i) g[i] = a[i] > 0.0f ? g[i] : 0.0f;
      break;
    case Activation::kTanh:
      for (int64_t i = begin; i < end; ++i) g[i] *= 1.0f - a[i] * a[i];
      break;
    case Activation::kSigmoid:
      for (int64_t i = begin; i < end; ++i) g[i] *= a[i] * (1.0f - a[i]);
      break;
  }
}

class CpuArray final : public DeviceArray {
 public:
  explicit CpuArray(int64_t size) : size_(size) {
    const size_t bytes =
        (std::max<int64_t>(size, 1) * sizeof(float) + 63) / 64 * 64;
    data_ = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (data_ != nullptr) std::memset(data_, 0, bytes);
  }
  ~CpuArray() override { std::free(data_); }
  bool ok() const { return data_ != nullptr; }
  float* data() override { return data_; }
  const float* data() const override { return data_; }
  int64_t size() const override { return size_; }

 private:
  float* data_ = nullptr;
  int64_t size_;
};

class CpuDevice final : public Device {
 public:
  // OpenBLAS runs single-threaded on whichever thread calls it: the pool
  // splits every op, products included, so OpenBLAS's own threads would
  // only compete with it for the same cores.
  explicit CpuDevice(int threads)
      : threads_(std::max(1, threads)), pool_(threads_), conv_(&pool_) {
    openblas_set_num_threads(1);
  }

  std::string Describe() const override {
    return absl::StrCat("cpu (OpenBLAS ", threads_,
                        threads_ == 1 ? " thread)" : " threads)");
  }

  DeviceKind kind() const override { return DeviceKind::kCpu; }

  bool computes_on_host_memory() const override { return true; }

  absl::StatusOr<std::shared_ptr<DeviceArray>> Allocate(int64_t size) override {
    RETURN_IF_ERROR(CheckAllocation(size));
    auto array = std::make_shared<CpuArray>(size);
    if (!array->ok()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", size, " floats of host memory"));
    }
    return array;
  }

  absl::Status Upload(absl::Span<const float> host, DeviceArray& dst) override {
    RETURN_IF_ERROR(CheckTransfer("upload", host.size(), dst));
    std::memcpy(dst.data(), host.data(), host.size() * sizeof(float));
    return absl::OkStatus();
  }

  absl::Status Download(const DeviceArray& src,
                        absl::Span<float> host) override {
    RETURN_IF_ERROR(CheckTransfer("download", host.size(), src));
    std::memcpy(host.data(), src.data(), host.size() * sizeof(float));
    return absl::OkStatus();
  }

  absl::Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                    float alpha, const DeviceArray& a, const DeviceArray& b,
                    float beta, DeviceArray& c) override {
    RETURN_IF_ERROR(CheckGemm(m, n, k, a, b, c));
    if (m == 0 || n == 0) return absl::OkStatus();
    if (k == 0) {  // BLAS leading dimensions must be >= 1: scale C here.
      float* out = c.data();
      for (int64_t i = 0; i < m * n; ++i) {
        out[i] = beta == 0.0f ? 0.0f : beta * out[i];
      }
      return absl::OkStatus();
    }
    ParallelGemm(trans_a, trans_b, m, n, k, alpha, a.data(), b.data(), beta,
                 c.data());
    return absl::OkStatus();
  }

  absl::Status BiasActivation(int64_t rows, int64_t cols,
                              const DeviceArray& bias, Activation activation,
                              DeviceArray& z) override {
    RETURN_IF_ERROR(CheckBiasActivation(rows, cols, bias, z));
    pool_.ParallelFor(rows, RowGrain(cols),
                      [&](int, int64_t first, int64_t last) {
                        BiasActivateRows(first, last, cols, bias.data(),
                                         activation, z.data());
                      });
    return absl::OkStatus();
  }

  absl::Status ActivationBackward(int64_t n, Activation activation,
                                  const DeviceArray& out,
                                  DeviceArray& grad) override {
    RETURN_IF_ERROR(CheckActivationBackward(n, out, grad));
    if (activation == Activation::kNone) return absl::OkStatus();
    pool_.ParallelFor(
        n, kMinChunkElements, [&](int, int64_t begin, int64_t end) {
          ActivationGradient(begin, end, activation, out.data(), grad.data());
        });
    return absl::OkStatus();
  }

  absl::Status ColumnSums(int64_t rows, int64_t cols, const DeviceArray& x,
                          DeviceArray& sums) override {
    RETURN_IF_ERROR(CheckColumnSums(rows, cols, x, sums));
    // Each chunk of rows sums into a vector of its own (no cache lines
    // shared while summing), stored once and added up in chunk order.
    const int64_t grain = RowGrain(cols);
    const int chunks = pool_.Chunks(rows, grain);
    std::vector<float> partial(chunks * cols, 0.0f);
    pool_.ParallelFor(rows, grain, [&](int chunk, int64_t first, int64_t last) {
      std::vector<float> local(cols, 0.0f);
      float* __restrict__ s = local.data();
      for (int64_t r = first; r < last; ++r) {
        const float* __restrict__ row = x.data() + r * cols;
        for (int64_t c = 0; c < cols; ++c) s[c] += row[c];
      }
      std::copy(local.begin(), local.end(), partial.begin() + chunk * cols);
    });
    // The first chunk's sums as they are (so one thread adds exactly as
    // before), then the others in order.
    float* __restrict__ s = sums.data();
    std::copy_n(partial.data(), cols, s);
    for (int chunk = 1; chunk < chunks; ++chunk) {
      const float* part = partial.data() + chunk * cols;
      for (int64_t c = 0; c < cols; ++c) s[c] += part[c];
    }
    return absl::OkStatus();
  }

  absl::Status SoftmaxCrossEntropy(int64_t rows, int64_t classes,
                                   const DeviceArray& logits,
                                   const DeviceArray& labels, DeviceArray* grad,
                                   DeviceArray& predictions,
                                   DeviceArray& stats) override {
    RETURN_IF_ERROR(CheckSoftmaxCrossEntropy(rows, classes, logits, labels,
                                             grad, predictions, stats));
    double loss = 0;
    int64_t correct = 0;
    const float scale = 1.0f / static_cast<float>(std::max<int64_t>(rows, 1));
    for (int64_t r = 0; r < rows; ++r) {
      const float* z = logits.data() + r * classes;
      // Truncated as the interface says; NaN fails the range test.
      const float class_id = std::trunc(labels.data()[r]);
      if (!(class_id >= 0 && class_id < static_cast<float>(classes))) {
        return absl::InvalidArgumentError(
            absl::StrCat("label ", labels.data()[r], " of example ", r,
                         " is outside the model's ", classes, " classes"));
      }
      const int64_t label = static_cast<int64_t>(class_id);
      int64_t best = 0;
      for (int64_t c = 1; c < classes; ++c) {
        if (z[c] > z[best]) best = c;
      }
      // log-sum-exp around the maximum keeps exp() in range.
      double sum = 0;
      for (int64_t c = 0; c < classes; ++c) sum += std::exp(z[c] - z[best]);
      const double log_sum = std::log(sum) + z[best];
      loss += log_sum - z[label];
      correct += best == label;
      predictions.data()[r] = static_cast<float>(best);
      if (grad != nullptr) {
        float* g = grad->data() + r * classes;
        for (int64_t c = 0; c < classes; ++c) {
          const float p = static_cast<float>(std::exp(z[c] - log_sum));
          g[c] = (p - (c == label ? 1.0f : 0.0f)) * scale;
        }
      }
    }
    stats.data()[0] = static_cast<float>(loss);
    stats.data()[1] = static_cast<float>(correct);
    return absl::OkStatus();
  }

  absl::Status Activate(int64_t n, Activation activation, const DeviceArray& x,
                        DeviceArray& y) override {
    RETURN_IF_ERROR(CheckElementwise("activate", n, {&x, &y}));
    cpu::Activate(pool_, n, activation, x.data(), y.data());
    return absl::OkStatus();
  }

  absl::Status ScaleShift(int64_t n, float scale, float offset,
                          const DeviceArray& x, DeviceArray& y) override {
    RETURN_IF_ERROR(CheckElementwise("scale+shift", n, {&x, &y}));
    const float* in = x.data();
    float* out = y.data();
    pool_.ParallelFor(n, kMinChunkElements,
                      [&](int, int64_t begin, int64_t end) {
                        for (int64_t i = begin; i < end; ++i) {
                          out[i] = in[i] * scale + offset;
                        }
                      });
    return absl::OkStatus();
  }

  absl::Status Multiply(int64_t n, const DeviceArray& a, const DeviceArray& b,
                        DeviceArray& out) override {
    RETURN_IF_ERROR(CheckElementwise("multiply", n, {&a, &b, &out}));
    const float* x = a.data();
    const float* y = b.data();
    float* z = out.data();
    pool_.ParallelFor(n, kMinChunkElements,
                      [&](int, int64_t begin, int64_t end) {
                        for (int64_t i = begin; i < end; ++i) {
                          z[i] = x[i] * y[i];
                        }
                      });
    return absl::OkStatus();
  }

  absl::Status Axpy(int64_t n, float alpha, const DeviceArray& x,
                    DeviceArray& y) override {
    RETURN_IF_ERROR(CheckElementwise("axpy", n, {&x, &y}));
    const float* in = x.data();
    float* out = y.data();
    pool_.ParallelFor(n, kMinChunkElements,
                      [&](int, int64_t begin, int64_t end) {
                        for (int64_t i = begin; i < end; ++i) {
                          out[i] += alpha * in[i];
                        }
                      });
    return absl::OkStatus();
  }

  absl::Status CopyBlock(int64_t rows, int64_t cols, const DeviceArray& src,
                         int64_t src_offset, int64_t src_stride,
                         DeviceArray& dst, int64_t dst_offset,
                         int64_t dst_stride, bool accumulate) override {
    RETURN_IF_ERROR(CheckCopyBlock(rows, cols, src, src_offset, src_stride, dst,
                                   dst_offset, dst_stride));
    if (cols == 0) return absl::OkStatus();
    const float* from = src.data() + src_offset;
    float* to = dst.data() + dst_offset;
    const int64_t grain =
        std::max<int64_t>(1, kMinChunkElements / std::max<int64_t>(cols, 1));
    pool_.ParallelFor(rows, grain, [&](int, int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const float* in = from + r * src_stride;
        float* out = to + r * dst_stride;
        if (accumulate) {
          for (int64_t j = 0; j < cols; ++j) out[j] += in[j];
        } else {
          std::memcpy(out, in, cols * sizeof(float));
        }
      }
    });
    return absl::OkStatus();
  }

  absl::Status BatchedGemm(bool trans_a, bool trans_b, int64_t m, int64_t n,
                           int64_t k, float alpha, const DeviceArray& a,
                           int64_t stride_a, const DeviceArray& b,
                           int64_t stride_b, float beta, DeviceArray& c,
                           int64_t stride_c, int64_t batch) override {
    RETURN_IF_ERROR(CheckBatchedGemm(m, n, k, a, stride_a, b, stride_b, c,
                                     stride_c, batch));
    if (m == 0 || n == 0 || batch == 0) return absl::OkStatus();
    const int64_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
    const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
    const CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
    const int64_t grain =
        std::max<int64_t>(1, kMinGemmMacs / std::max<int64_t>(m * n * k, 1));
    pool_.ParallelFor(batch, grain, [&](int, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        float* out = c.data() + i * stride_c;
        if (k == 0) {  // BLAS leading dimensions must be >= 1
          for (int64_t e = 0; e < m * n; ++e) {
            out[e] = beta == 0.0f ? 0.0f : beta * out[e];
          }
          continue;
        }
        cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha,
                    a.data() + i * stride_a, std::max<int64_t>(lda, 1),
                    b.data() + i * stride_b, std::max<int64_t>(ldb, 1), beta,
                    out, n);
      }
    });
    return absl::OkStatus();
  }

  absl::Status DropoutMask(int64_t n, float rate, uint64_t seed,
                           DeviceArray& mask) override {
    RETURN_IF_ERROR(CheckDropoutMask(n, rate, mask));
    float* m = mask.data();
    pool_.ParallelFor(n, kMinChunkElements,
                      [&](int, int64_t begin, int64_t end) {
                        for (int64_t i = begin; i < end; ++i) {
                          m[i] = DropoutScale(seed, i, rate);
                        }
                      });
    return absl::OkStatus();
  }

  absl::Status Im2Col(const WindowGeometry& g, const DeviceArray& x,
                      DeviceArray& cols) override {
    RETURN_IF_ERROR(CheckWindow("im2col", g, g.input_size(),
                                g.patch_rows() * g.patch_cols(), x, cols));
    cpu::Im2Col(pool_, g, x.data(), cols.data());
    return absl::OkStatus();
  }

  absl::Status Col2Im(const WindowGeometry& g, const DeviceArray& cols,
                      DeviceArray& x) override {
    RETURN_IF_ERROR(CheckWindow("col2im", g, g.patch_rows() * g.patch_cols(),
                                g.input_size(), cols, x));
    cpu::Col2Im(pool_, g, cols.data(), x.data());
    return absl::OkStatus();
  }

  // A batch whose patch matrix is grouped needs no scratch; every smaller
  // batch, taken whole, needs at most the grouping threshold's.
  int64_t ConvScratchFloats(const WindowGeometry& g) const override {
    return std::min(g.patch_rows() * g.patch_cols(),
                    kCpuWholeConvolutionFloats);
  }

  absl::Status ConvForward(const WindowGeometry& g, int64_t filters,
                           const DeviceArray& x, const DeviceArray& kernel,
                           DeviceArray& cols, DeviceArray& y) override {
    RETURN_IF_ERROR(
        CheckConv("conv forward", g, filters, x, kernel, y, nullptr, nullptr));
    // Small patch matrices whole, through cols; large ones a group at a
    // time (cpu_conv.h). The backward pass of the same batch decides alike.
    if (!cpu::CpuConvolution::WorthGrouping(g)) {
      return Device::ConvForward(g, filters, x, kernel, cols, y);
    }
    conv_.Forward(g, filters, x.data(), kernel.data(), y.data());
    return absl::OkStatus();
  }

  absl::Status ConvBackward(const WindowGeometry& g, int64_t filters,
                            const DeviceArray& x, const DeviceArray& dy,
                            const DeviceArray& kernel, const DeviceArray& cols,
                            DeviceArray& dcols, DeviceArray& dkernel,
                            DeviceArray* dx) override {
    RETURN_IF_ERROR(
        CheckConv("conv backward", g, filters, x, kernel, dy, &dkernel, dx));
    if (!cpu::CpuConvolution::WorthGrouping(g)) {
      return Device::ConvBackward(g, filters, x, dy, kernel, cols, dcols,
                                  dkernel, dx);
    }
    conv_.Backward(g, filters, x.data(), dy.data(), kernel.data(),
                   dkernel.data(), dx != nullptr ? dx->data() : nullptr);
    return absl::OkStatus();
  }

  absl::Status Pool(PoolKind kind, const WindowGeometry& g,
                    const DeviceArray& x, DeviceArray& y) override {
    RETURN_IF_ERROR(
        CheckWindow("pool", g, g.input_size(), g.output_size(g.c), x, y));
    cpu::Pool(pool_, kind, g, x.data(), y.data());
    return absl::OkStatus();
  }

  absl::Status PoolBackward(PoolKind kind, const WindowGeometry& g,
                            const DeviceArray& x, const DeviceArray& y,
                            const DeviceArray& dy, DeviceArray& dx) override {
    RETURN_IF_ERROR(CheckPoolBackward(g, x, y, dy, dx));
    cpu::PoolBackward(pool_, kind, g, x.data(), y.data(), dy.data(), dx.data());
    return absl::OkStatus();
  }

  absl::Status ChannelMoments(int64_t rows, int64_t channels,
                              const DeviceArray& x, DeviceArray& mean,
                              DeviceArray& var) override {
    RETURN_IF_ERROR(
        CheckChannelOp("channel moments", rows, channels, {&x}, {&mean, &var}));
    cpu::ChannelMoments(pool_, rows, channels, x.data(), mean.data(),
                        var.data());
    return absl::OkStatus();
  }

  absl::Status BatchNormApply(int64_t rows, int64_t channels,
                              const DeviceArray& x, const DeviceArray& mean,
                              const DeviceArray& var, float epsilon,
                              const DeviceArray* gamma, const DeviceArray* beta,
                              DeviceArray& y) override {
    RETURN_IF_ERROR(CheckChannelOp("batch norm", rows, channels, {&x, &y},
                                   {&mean, &var, gamma, beta}));
    cpu::BatchNormApply(pool_, rows, channels, x.data(), mean.data(),
                        var.data(), epsilon,
                        gamma != nullptr ? gamma->data() : nullptr,
                        beta != nullptr ? beta->data() : nullptr, y.data());
    return absl::OkStatus();
  }

  absl::Status BatchNormBackward(int64_t rows, int64_t channels,
                                 const DeviceArray& x, const DeviceArray& mean,
                                 const DeviceArray& var, float epsilon,
                                 const DeviceArray* gamma,
                                 const DeviceArray& dy, DeviceArray& dx,
                                 DeviceArray* dgamma,
                                 DeviceArray* dbeta) override {
    RETURN_IF_ERROR(CheckChannelOp("batch norm backward", rows, channels,
                                   {&x, &dy, &dx},
                                   {&mean, &var, gamma, dgamma, dbeta}));
    cpu::BatchNormBackward(
        pool_, rows, channels, x.data(), mean.data(), var.data(), epsilon,
        gamma != nullptr ? gamma->data() : nullptr, dy.data(), dx.data(),
        dgamma != nullptr ? dgamma->data() : nullptr,
        dbeta != nullptr ? dbeta->data() : nullptr);
    return absl::OkStatus();
  }

  absl::Status Synchronize() override { return absl::OkStatus(); }

 private:
  // C = alpha op(A) op(B) + beta C, split into parts of C that the pool's
  // threads compute with single-threaded SGEMM calls: bands of rows, or of
  // columns when C has too few rows to go round. No part shares an
  // element of C, so the result does not depend on the thread count
  // beyond OpenBLAS's own blocking of each part.
  void ParallelGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                    float alpha, const float* a, const float* b, float beta,
                    float* c) {
    const int64_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
    const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
    const CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
    const int64_t row_blocks = (m + kGemmBlock - 1) / kGemmBlock;
    const int64_t col_blocks = (n + kGemmBlock - 1) / kGemmBlock;
    const bool by_rows =
        row_blocks >= pool_.threads() || row_blocks >= col_blocks;
    const int64_t blocks = by_rows ? row_blocks : col_blocks;
    const int64_t block_macs = kGemmBlock * (by_rows ? n : m) * k;
    const int64_t grain =
        std::max<int64_t>(1, kMinGemmMacs / std::max<int64_t>(block_macs, 1));
    pool_.ParallelFor(blocks, grain, [&](int, int64_t first, int64_t last) {
      const int64_t begin = first * kGemmBlock;
      if (by_rows) {
        const int64_t end = std::min(last * kGemmBlock, m);
        const float* a_part = a + (trans_a ? begin : begin * k);
        cblas_sgemm(CblasRowMajor, ta, tb, end - begin, n, k, alpha, a_part,
                    lda, b, ldb, beta, c + begin * n, n);
      } else {
        const int64_t end = std::min(last * kGemmBlock, n);
        const float* b_part = b + (trans_b ? begin * k : begin);
        cblas_sgemm(CblasRowMajor, ta, tb, m, end - begin, k, alpha, a, lda,
                    b_part, ldb, beta, c + begin, n);
      }
    });
  }

  const int threads_;
  CpuThreadPool pool_;
  cpu::CpuConvolution conv_;
};

}  // namespace

std::unique_ptr<Device> CreateCpuDevice(int threads) {
  return std::make_unique<CpuDevice>(threads);
}

}  // namespace psflow
