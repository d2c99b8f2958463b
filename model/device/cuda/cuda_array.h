// The CUDA backend's arrays and host buffers.
//
// A CudaArray owns device memory and tracks its last copy on one of the
// device's copy streams: an event recorded after the copy, and whether the
// compute stream has been ordered after it yet. The device uses that to
// let compute wait only for the copies of the arrays it touches, so the
// upload of one layer's weights overlaps the math of the layer before.
// Thread-compatible, like the Device that owns it.
#ifndef PSFLOW_MODEL_DEVICE_CUDA_CUDA_ARRAY_H_
#define PSFLOW_MODEL_DEVICE_CUDA_CUDA_ARRAY_H_

#include <cstdint>

#include "model/device/cuda/cuda_resources.h"
#include "model/device/device.h"

namespace psflow::cuda {

class CudaArray final : public DeviceArray {
 public:
  // `owner` identifies the device that made it (checked on every use).
  CudaArray(const void* owner, DeviceMemory memory, int64_t size,
            Event last_copy)
      : owner_(owner),
        memory_(std::move(memory)),
        size_(size),
        last_copy_(std::move(last_copy)) {}

  float* data() override { return static_cast<float*>(memory_.get()); }
  const float* data() const override {
    return static_cast<const float*>(memory_.get());
  }
  int64_t size() const override { return size_; }

  const void* owner() const { return owner_; }
  cudaEvent_t last_copy() const { return last_copy_.get(); }
  // True from a copy's enqueue until some stream has been made to wait for
  // `last_copy` on behalf of the compute stream.
  bool copy_pending() const { return copy_pending_; }
  void set_copy_pending(bool pending) const { copy_pending_ = pending; }

 private:
  const void* const owner_;
  DeviceMemory memory_;
  const int64_t size_;
  Event last_copy_;
  // Bookkeeping of the owning device's streams, not the array's value.
  mutable bool copy_pending_ = false;
};

class PinnedHostBuffer final : public HostBuffer {
 public:
  PinnedHostBuffer(PinnedMemory memory, int64_t size)
      : memory_(std::move(memory)), size_(size) {}
  absl::Span<float> span() override {
    return absl::MakeSpan(static_cast<float*>(memory_.get()), size_);
  }

 private:
  PinnedMemory memory_;
  const int64_t size_;
};

}  // namespace psflow::cuda

#endif  // PSFLOW_MODEL_DEVICE_CUDA_CUDA_ARRAY_H_
