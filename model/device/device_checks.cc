#include "model/device/device_checks.h"

#include "absl/strings/str_cat.h"

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

}  // namespace psflow
