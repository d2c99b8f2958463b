#include "model/device/device.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace psflow {
namespace {

// Ordinary 64-byte-aligned heap memory: what a device without a faster
// kind of host memory stages its transfers in.
class HeapHostBuffer final : public HostBuffer {
 public:
  explicit HeapHostBuffer(int64_t size) : size_(size) {
    const size_t bytes =
        (static_cast<size_t>(size > 0 ? size : 1) * sizeof(float) + 63) / 64 *
        64;
    data_ = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (data_ != nullptr) std::memset(data_, 0, bytes);
  }
  ~HeapHostBuffer() override { std::free(data_); }
  bool ok() const { return data_ != nullptr; }
  absl::Span<float> span() override { return absl::MakeSpan(data_, size_); }

 private:
  float* data_ = nullptr;
  const int64_t size_;
};

}  // namespace

const char* ActivationName(Activation activation) {
  switch (activation) {
    case Activation::kNone:
      return "linear";
    case Activation::kRelu:
      return "relu";
    case Activation::kTanh:
      return "tanh";
    case Activation::kSigmoid:
      return "sigmoid";
  }
  return "unknown";
}

absl::StatusOr<std::shared_ptr<HostBuffer>> Device::AllocateHost(int64_t size) {
  if (size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot allocate ", size, " floats of host memory"));
  }
  auto buffer = std::make_shared<HeapHostBuffer>(size);
  if (!buffer->ok()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", size, " floats of host memory"));
  }
  return buffer;
}

absl::Status Device::ConvForward(const WindowGeometry& g, int64_t filters,
                                 const DeviceArray& x,
                                 const DeviceArray& kernel, DeviceArray& cols,
                                 DeviceArray& y) {
  RETURN_IF_ERROR(Im2Col(g, x, cols));
  return Gemm(false, false, g.patch_rows(), filters, g.patch_cols(), 1.0f, cols,
              kernel, 0.0f, y);
}

absl::Status Device::ConvBackward(const WindowGeometry& g, int64_t filters,
                                  const DeviceArray& x, const DeviceArray& dy,
                                  const DeviceArray& kernel,
                                  const DeviceArray& cols, DeviceArray& dcols,
                                  DeviceArray& dkernel, DeviceArray* dx) {
  (void)x;  // its patches are in `cols`
  const int64_t rows = g.patch_rows(), k = g.patch_cols();
  RETURN_IF_ERROR(
      Gemm(true, false, k, filters, rows, 1.0f, cols, dy, 0.0f, dkernel));
  if (dx == nullptr) return absl::OkStatus();
  RETURN_IF_ERROR(
      Gemm(false, true, rows, k, filters, 1.0f, dy, kernel, 0.0f, dcols));
  return Col2Im(g, dcols, *dx);
}

}  // namespace psflow
