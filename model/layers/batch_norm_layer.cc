// BatchNormalization over the last axis. Training normalizes with the
// batch's mean and (biased) variance, which go into the moving statistics'
// gradient arrays so the worker pushes them; the parameter servers fold
// them into moving_mean and moving_variance as moving averages. Inference
// normalizes with the moving statistics.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/layers/layers.h"

namespace psflow {
namespace {

class BatchNormKernel final : public LayerKernel {
 public:
  BatchNormKernel(Device* device, int64_t positions, int64_t channels,
                  float epsilon, bool center, bool scale,
                  const LayerArrays& arrays)
      : device_(device),
        positions_(positions),
        channels_(channels),
        epsilon_(epsilon),
        arrays_(arrays) {
    int v = 0;
    if (scale) gamma_ = v++;
    if (center) beta_ = v++;
    mean_ = v++;
    var_ = v++;
  }

  absl::Status Forward(const StepContext& step, const DeviceArray& x,
                       DeviceArray& y) override {
    const int64_t rows = step.batch * positions_;
    // The batch's statistics in training, the moving ones in inference.
    const std::vector<DeviceArray*>& stats =
        step.training ? arrays_.gradients : arrays_.values;
    if (step.training) {
      RETURN_IF_ERROR(device_->ChannelMoments(rows, channels_, x, *stats[mean_],
                                              *stats[var_]));
    }
    return device_->BatchNormApply(rows, channels_, x, *stats[mean_],
                                   *stats[var_], epsilon_, Value(gamma_),
                                   Value(beta_), y);
  }

  absl::Status Backward(const StepContext& step, const DeviceArray& x,
                        const DeviceArray&, DeviceArray& dy,
                        DeviceArray* dx) override {
    const int64_t rows = step.batch * positions_;
    // Without dx (a first layer), dy takes the input gradient nobody reads.
    return device_->BatchNormBackward(
        rows, channels_, x, *arrays_.gradients[mean_], *arrays_.gradients[var_],
        epsilon_, Value(gamma_), dy, dx != nullptr ? *dx : dy, Gradient(gamma_),
        Gradient(beta_));
  }

 private:
  const DeviceArray* Value(int v) const {
    return v < 0 ? nullptr : arrays_.values[v];
  }
  DeviceArray* Gradient(int v) const {
    return v < 0 ? nullptr : arrays_.gradients[v];
  }

  Device* const device_;
  const int64_t positions_, channels_;  // rows per example; last axis
  const float epsilon_;
  const LayerArrays arrays_;
  int gamma_ = -1, beta_ = -1, mean_ = -1, var_ = -1;  // variable indices
};

class BatchNormLayer final : public Layer {
 public:
  BatchNormLayer(std::string name, const Shape& input, float momentum,
                 float epsilon, bool center, bool scale)
      : Layer(std::move(name), input, input),
        momentum_(momentum),
        epsilon_(epsilon),
        center_(center),
        scale_(scale) {
    const Shape channels = {input.back()};
    if (scale) AddVariable("gamma", channels, Initializer::kOnes);
    if (center) AddVariable("beta", channels, Initializer::kZeros);
    AddVariable("moving_mean", channels, Initializer::kZeros,
                VariableUpdate::kMovingAverage, momentum);
    AddVariable("moving_variance", channels, Initializer::kOnes,
                VariableUpdate::kMovingAverage, momentum);
  }

  std::string Describe() const override {
    return absl::StrCat(name(), " (BatchNormalization momentum ", momentum_,
                        " epsilon ", epsilon_, center_ ? " center" : "",
                        scale_ ? " scale" : "", ") -> ",
                        ShapeString(output_shape()));
  }

  absl::StatusOr<std::unique_ptr<LayerKernel>> Instantiate(
      Device* device, int64_t, const LayerArrays& arrays) const override {
    const Shape& in = input_shape();
    return std::make_unique<BatchNormKernel>(
        device, NumElements(in) / in.back(), in.back(), epsilon_, center_,
        scale_, arrays);
  }

 private:
  const float momentum_, epsilon_;
  const bool center_, scale_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Layer>> MakeBatchNormalization(
    std::string name, const Shape& input, float momentum, float epsilon,
    bool center, bool scale) {
  if (input.empty()) {
    return absl::InvalidArgumentError(
        "BatchNormalization needs an input with a channel axis");
  }
  return std::make_unique<BatchNormLayer>(std::move(name), input, momentum,
                                          epsilon, center, scale);
}

}  // namespace psflow
