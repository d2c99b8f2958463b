// A multi-layer perceptron classifier over a Device: dense layers with an
// activation, a final dense layer producing logits, softmax cross-entropy.
// Softmax regression is the case with no hidden layers. Reached through
// the registry (model/registry.h) as the "mlp" and "softmax_regression"
// kinds; nothing outside model/ names these classes.
//
// Variables: "dense_<i>/kernel" [in, out] (Glorot uniform) and
// "dense_<i>/bias" [out] (zeros), layer by layer.
//
// MlpDefinition is immutable; an Mlp is used by one thread at a time.
#ifndef PSFLOW_MODEL_MLP_H_
#define PSFLOW_MODEL_MLP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/device/device.h"
#include "model/model.h"

namespace psflow {

struct MlpSpec {
  std::vector<int64_t> hidden_sizes;  // empty: softmax regression
  Activation activation = Activation::kRelu;
};

class MlpDefinition final : public ModelDefinition {
 public:
  // InvalidArgument naming the field for sizes that are not positive or
  // fewer than 2 classes.
  static absl::StatusOr<std::unique_ptr<MlpDefinition>> Create(
      const MlpSpec& spec, const InputSpec& input);

  std::string Describe() const override;
  const std::vector<ModelVariable>& variables() const override {
    return variables_;
  }
  absl::StatusOr<std::unique_ptr<Model>> Instantiate(
      Device* device, int64_t max_batch) const override;
  // One part per dense layer ("dense_1"...), after the input.
  std::vector<ModelPart> MemoryParts() const override;

  // input, hidden..., classes.
  const std::vector<int64_t>& widths() const { return widths_; }
  const MlpSpec& spec() const { return spec_; }

 private:
  MlpDefinition(const MlpSpec& spec, const InputSpec& input);

  const MlpSpec spec_;
  std::vector<int64_t> widths_;
  std::vector<ModelVariable> variables_;
};

class Mlp final : public Model {
 public:
  absl::Status LoadParameters(
      const std::vector<absl::Span<const float>>& parameters) override;
  absl::StatusOr<BatchStats> TrainStep(
      const ExampleBatch& batch,
      const std::vector<absl::Span<float>>& gradients) override;
  absl::StatusOr<BatchStats> Evaluate(const ExampleBatch& batch,
                                      absl::Span<int32_t> predictions) override;

 private:
  friend class MlpDefinition;
  Mlp(const MlpDefinition& definition, Device* device, int64_t max_batch)
      : widths_(definition.widths()),
        activation_(definition.spec().activation),
        device_(device),
        max_batch_(max_batch) {}
  absl::Status Allocate();
  absl::Status Forward(const ExampleBatch& batch, bool with_gradient);
  absl::StatusOr<BatchStats> Stats(int64_t size);

  const std::vector<int64_t> widths_;  // input, hidden..., classes
  const Activation activation_;
  Device* const device_;
  const int64_t max_batch_;
  // Per layer l (0-based): weights, biases and their gradients.
  std::vector<std::shared_ptr<DeviceArray>> kernels_, biases_;
  std::vector<std::shared_ptr<DeviceArray>> kernel_grads_, bias_grads_;
  // activations_[0] is the input; activations_[l + 1] the output of layer l.
  std::vector<std::shared_ptr<DeviceArray>> activations_;
  // Gradients with respect to each activation (same shapes).
  std::vector<std::shared_ptr<DeviceArray>> activation_grads_;
  std::shared_ptr<DeviceArray> labels_, predictions_, stats_;
  std::shared_ptr<HostBuffer> stats_staging_;  // the device's fastest kind
  std::vector<float> label_staging_;
};

}  // namespace psflow

#endif  // PSFLOW_MODEL_MLP_H_
