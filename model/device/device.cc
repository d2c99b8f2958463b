#include "model/device/device.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

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

}  // namespace psflow
