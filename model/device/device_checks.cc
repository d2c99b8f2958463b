#include "model/device/device_checks.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace psflow {
namespace {

absl::Status Negative(const char* op, const char* dimension, int64_t value) {
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": ", dimension, " is ", value, "; it must be >= 0"));
}

// "what" needs `need` values and got an array of `have`.
absl::Status TooSmall(const char* op, const char* what, int64_t need,
                      int64_t have) {
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": ", what, " needs ", need, " values, its array has ", have));
}

}  // namespace

absl::Status CheckAllocation(int64_t size) {
  if (size < 0) return Negative("allocate", "size", size);
  return absl::OkStatus();
}

absl::Status CheckTransfer(const char* what, int64_t count,
                           const DeviceArray& array) {
  if (count > array.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " of ", count, " values; the array holds ", array.size()));
  }
  return absl::OkStatus();
}

absl::Status CheckGemm(int64_t m, int64_t n, int64_t k, const DeviceArray& a,
                       const DeviceArray& b, const DeviceArray& c) {
  if (m < 0) return Negative("gemm", "m", m);
  if (n < 0) return Negative("gemm", "n", n);
  if (k < 0) return Negative("gemm", "k", k);
  if (a.size() < m * k || b.size() < k * n || c.size() < m * n) {
    return absl::InvalidArgumentError(
        absl::StrCat("gemm ", m, "x", n, "x", k, ": operand too small (A ",
                     a.size(), ", B ", b.size(), ", C ", c.size(), " values)"));
  }
  return absl::OkStatus();
}

absl::Status CheckBiasActivation(int64_t rows, int64_t cols,
                                 const DeviceArray& bias,
                                 const DeviceArray& z) {
  constexpr char kOp[] = "bias+activation";
  if (rows < 0) return Negative(kOp, "rows", rows);
  if (cols < 0) return Negative(kOp, "cols", cols);
  if (bias.size() < cols) return TooSmall(kOp, "bias", cols, bias.size());
  if (z.size() < rows * cols) return TooSmall(kOp, "z", rows * cols, z.size());
  return absl::OkStatus();
}

absl::Status CheckActivationBackward(int64_t n, const DeviceArray& out,
                                     const DeviceArray& grad) {
  constexpr char kOp[] = "activation backward";
  if (n < 0) return Negative(kOp, "n", n);
  if (out.size() < n) return TooSmall(kOp, "out", n, out.size());
  if (grad.size() < n) return TooSmall(kOp, "grad", n, grad.size());
  return absl::OkStatus();
}

absl::Status CheckColumnSums(int64_t rows, int64_t cols, const DeviceArray& x,
                             const DeviceArray& sums) {
  constexpr char kOp[] = "column sums";
  if (rows < 0) return Negative(kOp, "rows", rows);
  if (cols < 0) return Negative(kOp, "cols", cols);
  if (x.size() < rows * cols) return TooSmall(kOp, "x", rows * cols, x.size());
  if (sums.size() < cols) return TooSmall(kOp, "sums", cols, sums.size());
  return absl::OkStatus();
}

absl::Status CheckSoftmaxCrossEntropy(int64_t rows, int64_t classes,
                                      const DeviceArray& logits,
                                      const DeviceArray& labels,
                                      const DeviceArray* grad,
                                      const DeviceArray& predictions,
                                      const DeviceArray& stats) {
  constexpr char kOp[] = "softmax cross-entropy";
  if (rows < 0) return Negative(kOp, "rows", rows);
  if (classes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": classes is ", classes, "; it must be at least 1"));
  }
  const int64_t n = rows * classes;
  if (logits.size() < n) return TooSmall(kOp, "logits", n, logits.size());
  if (labels.size() < rows) return TooSmall(kOp, "labels", rows, labels.size());
  if (grad != nullptr && grad->size() < n) {
    return TooSmall(kOp, "grad", n, grad->size());
  }
  if (predictions.size() < rows) {
    return TooSmall(kOp, "predictions", rows, predictions.size());
  }
  if (stats.size() < 2) return TooSmall(kOp, "stats", 2, stats.size());
  return absl::OkStatus();
}

absl::Status CheckElementwise(
    const char* op, int64_t n,
    std::initializer_list<const DeviceArray*> arrays) {
  if (n < 0) return Negative(op, "n", n);
  for (const DeviceArray* a : arrays) {
    if (a->size() < n) return TooSmall(op, "operand", n, a->size());
  }
  return absl::OkStatus();
}

namespace {

// The last value a block touches, +1: `offset + (rows - 1) * stride + cols`.
absl::Status CheckBlockSide(const char* side, int64_t rows, int64_t cols,
                            const DeviceArray& array, int64_t offset,
                            int64_t stride) {
  constexpr char kOp[] = "copy block";
  if (offset < 0) return Negative(kOp, side, offset);
  if (rows > 0 && cols > 0 && stride < cols) {
    return absl::InvalidArgumentError(
        absl::StrCat("copy block: the ", side, " stride ", stride,
                     " is below the block's ", cols, " columns"));
  }
  const int64_t end =
      rows == 0 || cols == 0 ? 0 : offset + (rows - 1) * stride + cols;
  if (array.size() < end) return TooSmall(kOp, side, end, array.size());
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckCopyBlock(int64_t rows, int64_t cols, const DeviceArray& src,
                            int64_t src_offset, int64_t src_stride,
                            const DeviceArray& dst, int64_t dst_offset,
                            int64_t dst_stride) {
  if (rows < 0) return Negative("copy block", "rows", rows);
  if (cols < 0) return Negative("copy block", "cols", cols);
  RETURN_IF_ERROR(
      CheckBlockSide("source", rows, cols, src, src_offset, src_stride));
  return CheckBlockSide("destination", rows, cols, dst, dst_offset, dst_stride);
}

absl::Status CheckBatchedGemm(int64_t m, int64_t n, int64_t k,
                              const DeviceArray& a, int64_t stride_a,
                              const DeviceArray& b, int64_t stride_b,
                              const DeviceArray& c, int64_t stride_c,
                              int64_t batch) {
  constexpr char kOp[] = "batched gemm";
  if (m < 0) return Negative(kOp, "m", m);
  if (n < 0) return Negative(kOp, "n", n);
  if (k < 0) return Negative(kOp, "k", k);
  if (batch < 0) return Negative(kOp, "batch", batch);
  if (stride_a < 0 || stride_b < 0) {
    return Negative(kOp, "stride", std::min(stride_a, stride_b));
  }
  if (batch > 1 && stride_c < m * n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batched gemm: C's stride ", stride_c, " is below its ", m * n,
        " values: the products would overwrite each other"));
  }
  if (batch == 0) return absl::OkStatus();
  const int64_t last = batch - 1;
  if (a.size() < last * stride_a + m * k) {
    return TooSmall(kOp, "A", last * stride_a + m * k, a.size());
  }
  if (b.size() < last * stride_b + k * n) {
    return TooSmall(kOp, "B", last * stride_b + k * n, b.size());
  }
  if (c.size() < last * stride_c + m * n) {
    return TooSmall(kOp, "C", last * stride_c + m * n, c.size());
  }
  return absl::OkStatus();
}

absl::Status CheckDropoutMask(int64_t n, float rate, const DeviceArray& mask) {
  if (!(rate >= 0.0f && rate < 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dropout mask: rate is ", rate, "; it must be in [0, 1)"));
  }
  return CheckElementwise("dropout mask", n, {&mask});
}

absl::Status CheckWindow(const char* op, const WindowGeometry& g,
                         int64_t in_values, int64_t out_values,
                         const DeviceArray& in, const DeviceArray& out) {
  for (auto [name, value] : {std::pair{"n", g.n},
                             {"h", g.h},
                             {"w", g.w},
                             {"c", g.c},
                             {"oh", g.oh},
                             {"ow", g.ow}}) {
    if (value < 0) return Negative(op, name, value);
  }
  for (auto [name, value] :
       {std::pair{"kh", g.kh}, {"kw", g.kw}, {"sh", g.sh}, {"sw", g.sw}}) {
    if (value < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": ", name, " is ", value, "; it must be >= 1"));
    }
  }
  if (g.pad_top < 0 || g.pad_left < 0 || g.pad_top >= g.kh ||
      g.pad_left >= g.kw) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": padding (", g.pad_top, ", ", g.pad_left,
        ") must be >= 0 and smaller than the window ", g.kh, "x", g.kw));
  }
  // The last window must start inside the image plus its padding, and the
  // sizes multiply without overflow (each dimension of a real tensor is far
  // below 2^31, so bounding them bounds the products).
  constexpr int64_t kMaxDimension = int64_t{1} << 31;
  for (int64_t v : {g.n, g.h, g.w, g.c, g.kh, g.kw, g.oh, g.ow}) {
    if (v >= kMaxDimension) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": dimension ", v, " is too large"));
    }
  }
  if ((g.oh > 0 && (g.oh - 1) * g.sh - g.pad_top >= g.h) ||
      (g.ow > 0 && (g.ow - 1) * g.sw - g.pad_left >= g.w)) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": ", g.oh, "x", g.ow, " output positions reach past the ", g.h,
        "x", g.w, " input"));
  }
  if (in.size() < in_values) return TooSmall(op, "input", in_values, in.size());
  if (out.size() < out_values) {
    return TooSmall(op, "output", out_values, out.size());
  }
  return absl::OkStatus();
}

absl::Status CheckConv(const char* op, const WindowGeometry& g, int64_t filters,
                       const DeviceArray& x, const DeviceArray& kernel,
                       const DeviceArray& out, const DeviceArray* dkernel,
                       const DeviceArray* dx) {
  if (filters < 0) return Negative(op, "filters", filters);
  if (filters >= int64_t{1} << 31) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", filters, " filters is too many"));
  }
  // Bounds every dimension first, so the products below cannot overflow.
  RETURN_IF_ERROR(CheckWindow(op, g, g.input_size(), 0, x, x));
  const int64_t kernel_values = g.patch_cols() * filters;
  if (kernel.size() < kernel_values) {
    return TooSmall(op, "kernel", kernel_values, kernel.size());
  }
  const int64_t out_values = g.patch_rows() * filters;
  if (out.size() < out_values) {
    return TooSmall(op, "output", out_values, out.size());
  }
  if (dkernel != nullptr && dkernel->size() < kernel_values) {
    return TooSmall(op, "kernel gradient", kernel_values, dkernel->size());
  }
  if (dx != nullptr && dx->size() < g.input_size()) {
    return TooSmall(op, "input gradient", g.input_size(), dx->size());
  }
  return absl::OkStatus();
}

absl::Status CheckPoolBackward(const WindowGeometry& g, const DeviceArray& x,
                               const DeviceArray& y, const DeviceArray& dy,
                               const DeviceArray& dx) {
  constexpr char kOp[] = "pool backward";
  RETURN_IF_ERROR(
      CheckWindow(kOp, g, g.input_size(), g.output_size(g.c), x, y));
  return CheckWindow(kOp, g, g.input_size(), g.output_size(g.c), dx, dy);
}

absl::Status CheckChannelOp(
    const char* op, int64_t rows, int64_t channels,
    std::initializer_list<const DeviceArray*> data,
    std::initializer_list<const DeviceArray*> per_channel) {
  if (rows < 0) return Negative(op, "rows", rows);
  if (channels < 0) return Negative(op, "channels", channels);
  for (const DeviceArray* a : data) {
    if (a->size() < rows * channels) {
      return TooSmall(op, "data", rows * channels, a->size());
    }
  }
  for (const DeviceArray* a : per_channel) {
    if (a != nullptr && a->size() < channels) {
      return TooSmall(op, "per-channel operand", channels, a->size());
    }
  }
  return absl::OkStatus();
}

}  // namespace psflow
