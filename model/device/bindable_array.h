// A device array that can stand for the caller's host memory instead of
// its own, on a device that computes on host memory
// (Device::computes_on_host_memory(), the CPU backend): the graph model
// reads a trainer's pulled parameters and writes its gradient buffers in
// place, rather than copying every parameter in and every gradient out
// each step.
//
// Thread-compatible, like the device it belongs to.
#ifndef PSFLOW_MODEL_DEVICE_BINDABLE_ARRAY_H_
#define PSFLOW_MODEL_DEVICE_BINDABLE_ARRAY_H_

#include <cstdint>
#include <memory>
#include <utility>

#include "model/device/device.h"

namespace psflow {

class BindableArray final : public DeviceArray {
 public:
  // `own`: the device's array, used while nothing is bound.
  explicit BindableArray(std::shared_ptr<DeviceArray> own)
      : own_(std::move(own)) {}

  float* data() override { return bound_ != nullptr ? bound_ : own_->data(); }
  const float* data() const override {
    return bound_ != nullptr ? bound_ : own_->data();
  }
  int64_t size() const override { return own_->size(); }

  // From here until Unbind(), the array is `memory` (size() floats), which
  // the caller keeps valid. Only for a device that computes on host memory.
  void Bind(float* memory) { bound_ = memory; }
  void Unbind() { bound_ = nullptr; }
  bool bound() const { return bound_ != nullptr; }

 private:
  const std::shared_ptr<DeviceArray> own_;
  float* bound_ = nullptr;
};

}  // namespace psflow

#endif  // PSFLOW_MODEL_DEVICE_BINDABLE_ARRAY_H_
