// MaxPooling2D, AveragePooling2D and GlobalAveragePooling2D (an average
// pool whose window is the whole image).
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/layers/layers.h"

namespace psflow {
namespace {

class PoolKernel final : public LayerKernel {
 public:
  PoolKernel(Device* device, PoolKind kind, const WindowGeometry& g)
      : device_(device), kind_(kind), geometry_(g) {}

  absl::Status Forward(const StepContext& step, const DeviceArray& x,
                       DeviceArray& y) override {
    return device_->Pool(kind_, Batch(step.batch), x, y);
  }

  absl::Status Backward(const StepContext& step, const DeviceArray& x,
                        const DeviceArray& y, DeviceArray& dy,
                        DeviceArray* dx) override {
    if (dx == nullptr) return absl::OkStatus();  // nothing to learn here
    return device_->PoolBackward(kind_, Batch(step.batch), x, y, dy, *dx);
  }

 private:
  WindowGeometry Batch(int64_t n) const {
    WindowGeometry g = geometry_;
    g.n = n;
    return g;
  }

  Device* const device_;
  const PoolKind kind_;
  const WindowGeometry geometry_;
};

class PoolLayer final : public Layer {
 public:
  PoolLayer(std::string name, const Shape& input, Shape output, PoolKind kind,
            const WindowGeometry& g, std::string description)
      : Layer(std::move(name), input, std::move(output)),
        kind_(kind),
        geometry_(g),
        description_(std::move(description)) {}

  std::string Describe() const override {
    return absl::StrCat(name(), " (", description_, ") -> ",
                        ShapeString(output_shape()));
  }

  absl::StatusOr<std::unique_ptr<LayerKernel>> Instantiate(
      Device* device, int64_t, const LayerArrays&) const override {
    return std::make_unique<PoolKernel>(device, kind_, geometry_);
  }

 private:
  const PoolKind kind_;
  const WindowGeometry geometry_;
  const std::string description_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Layer>> MakePooling2D(std::string name,
                                                     const Shape& input,
                                                     PoolKind kind,
                                                     const Window2D& window) {
  ASSIGN_OR_RETURN(WindowGeometry g, PlanWindow(input, window));
  return std::make_unique<PoolLayer>(
      std::move(name), input, Shape{g.oh, g.ow, g.c}, kind, g,
      absl::StrCat(
          kind == PoolKind::kMax ? "MaxPooling2D " : "AveragePooling2D ",
          window.kh, "x", window.kw, " stride ", window.sh, "x", window.sw,
          window.padding == Padding::kSame ? " same" : " valid"));
}

absl::StatusOr<std::unique_ptr<Layer>> MakeGlobalAveragePooling2D(
    std::string name, const Shape& input) {
  if (input.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("takes height x width x channels images, its input is ",
                     ShapeString(input)));
  }
  Window2D window;
  window.kh = window.sh = input[0];
  window.kw = window.sw = input[1];
  ASSIGN_OR_RETURN(WindowGeometry g, PlanWindow(input, window));
  return std::make_unique<PoolLayer>(std::move(name), input, Shape{input[2]},
                                     PoolKind::kAverage, g,
                                     "GlobalAveragePooling2D");
}

}  // namespace psflow
