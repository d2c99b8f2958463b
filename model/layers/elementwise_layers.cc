// Layers that act on each value alone: Rescaling, Activation/ReLU, Flatten
// (a copy: NHWC data is already in Keras' flattening order) and Dropout.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/layers/layers.h"

namespace psflow {
namespace {

// What an elementwise layer does to one batch of `n` values.
class ElementwiseKernel : public LayerKernel {
 public:
  ElementwiseKernel(Device* device, int64_t per_example)
      : device_(device), per_example_(per_example) {}

 protected:
  int64_t Size(const StepContext& step) const {
    return step.batch * per_example_;
  }
  absl::Status Copy(int64_t n, const DeviceArray& from, DeviceArray& to) {
    return device_->ScaleShift(n, 1.0f, 0.0f, from, to);
  }

  Device* const device_;
  const int64_t per_example_;
};

class ScaleKernel final : public ElementwiseKernel {
 public:
  ScaleKernel(Device* device, int64_t per_example, float scale, float offset)
      : ElementwiseKernel(device, per_example),
        scale_(scale),
        offset_(offset) {}

  absl::Status Forward(const StepContext& step, const DeviceArray& x,
                       DeviceArray& y) override {
    return device_->ScaleShift(Size(step), scale_, offset_, x, y);
  }
  absl::Status Backward(const StepContext& step, const DeviceArray&,
                        const DeviceArray&, DeviceArray& dy,
                        DeviceArray* dx) override {
    if (dx == nullptr) return absl::OkStatus();
    return device_->ScaleShift(Size(step), scale_, 0.0f, dy, *dx);
  }

 private:
  const float scale_, offset_;  // Flatten: 1 and 0
};

class ActivationKernel final : public ElementwiseKernel {
 public:
  ActivationKernel(Device* device, int64_t per_example, Activation activation)
      : ElementwiseKernel(device, per_example), activation_(activation) {}

  absl::Status Forward(const StepContext& step, const DeviceArray& x,
                       DeviceArray& y) override {
    return device_->Activate(Size(step), activation_, x, y);
  }
  absl::Status Backward(const StepContext& step, const DeviceArray&,
                        const DeviceArray& y, DeviceArray& dy,
                        DeviceArray* dx) override {
    if (dx == nullptr) return absl::OkStatus();
    RETURN_IF_ERROR(
        device_->ActivationBackward(Size(step), activation_, y, dy));
    return Copy(Size(step), dy, *dx);
  }

 private:
  const Activation activation_;
};

class DropoutKernel final : public ElementwiseKernel {
 public:
  DropoutKernel(Device* device, int64_t per_example, float rate)
      : ElementwiseKernel(device, per_example), rate_(rate) {}

  absl::Status Allocate(int64_t max_batch) {
    ASSIGN_OR_RETURN(mask_, device_->Allocate(max_batch * per_example_));
    return absl::OkStatus();
  }

  absl::Status Forward(const StepContext& step, const DeviceArray& x,
                       DeviceArray& y) override {
    if (!step.training) return Copy(Size(step), x, y);
    RETURN_IF_ERROR(device_->DropoutMask(Size(step), rate_, step.seed, *mask_));
    return device_->Multiply(Size(step), x, *mask_, y);
  }
  absl::Status Backward(const StepContext& step, const DeviceArray&,
                        const DeviceArray&, DeviceArray& dy,
                        DeviceArray* dx) override {
    if (dx == nullptr) return absl::OkStatus();
    return device_->Multiply(Size(step), dy, *mask_, *dx);
  }

 private:
  const float rate_;
  std::shared_ptr<DeviceArray> mask_;  // this step's, kept for Backward
};

enum class Kind { kRescaling, kFlatten, kActivation, kDropout };

class ElementwiseLayer final : public Layer {
 public:
  ElementwiseLayer(std::string name, const Shape& input, Shape output,
                   Kind kind, float a, float b, Activation activation,
                   std::string description)
      : Layer(std::move(name), input, std::move(output)),
        kind_(kind),
        a_(a),
        b_(b),
        activation_(activation),
        description_(std::move(description)) {}

  std::string Describe() const override {
    return absl::StrCat(name(), " (", description_, ") -> ",
                        ShapeString(output_shape()));
  }

  // DropoutKernel::Allocate: its mask.
  int64_t ScratchFloatsPerExample() const override {
    return kind_ == Kind::kDropout ? NumElements(input_shape()) : 0;
  }

  absl::StatusOr<std::unique_ptr<LayerKernel>> Instantiate(
      Device* device, int64_t max_batch, const LayerArrays&) const override {
    const int64_t n = NumElements(input_shape());
    switch (kind_) {
      case Kind::kRescaling:
        return std::make_unique<ScaleKernel>(device, n, a_, b_);
      case Kind::kFlatten:
        return std::make_unique<ScaleKernel>(device, n, 1.0f, 0.0f);
      case Kind::kActivation:
        return std::make_unique<ActivationKernel>(device, n, activation_);
      case Kind::kDropout: {
        auto kernel = std::make_unique<DropoutKernel>(device, n, a_);
        RETURN_IF_ERROR(kernel->Allocate(max_batch));
        return kernel;
      }
    }
    return absl::InternalError("unknown elementwise layer");
  }

 private:
  const Kind kind_;
  const float a_, b_;
  const Activation activation_;
  const std::string description_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Layer>> MakeRescaling(std::string name,
                                                     const Shape& input,
                                                     float scale,
                                                     float offset) {
  return std::make_unique<ElementwiseLayer>(
      std::move(name), input, input, Kind::kRescaling, scale, offset,
      Activation::kNone,
      absl::StrCat("Rescaling scale ", scale, " offset ", offset));
}

absl::StatusOr<std::unique_ptr<Layer>> MakeActivation(std::string name,
                                                      const Shape& input,
                                                      Activation activation) {
  return std::make_unique<ElementwiseLayer>(
      std::move(name), input, input, Kind::kActivation, 0, 0, activation,
      absl::StrCat("Activation ", ActivationName(activation)));
}

absl::StatusOr<std::unique_ptr<Layer>> MakeFlatten(std::string name,
                                                   const Shape& input) {
  return std::make_unique<ElementwiseLayer>(
      std::move(name), input, Shape{NumElements(input)}, Kind::kFlatten, 1, 0,
      Activation::kNone, "Flatten");
}

absl::StatusOr<std::unique_ptr<Layer>> MakeReshape(std::string name,
                                                   const Shape& input,
                                                   const Shape& output) {
  return std::make_unique<ElementwiseLayer>(
      std::move(name), input, output, Kind::kFlatten, 1, 0, Activation::kNone,
      absl::StrCat("Reshape ", ShapeString(output)));
}

absl::StatusOr<std::unique_ptr<Layer>> MakeDropout(std::string name,
                                                   const Shape& input,
                                                   float rate) {
  return std::make_unique<ElementwiseLayer>(
      std::move(name), input, input, Kind::kDropout, rate, 0, Activation::kNone,
      absl::StrCat("Dropout ", rate));
}

}  // namespace psflow
