// A multi-layer perceptron classifier over a Device: dense layers with an
// activation, a final dense layer producing logits, softmax cross-entropy.
// Softmax regression is the case with no hidden layers.
//
// Parameters live on the parameter servers as variables named
// "dense_<i>/kernel" [in, out] and "dense_<i>/bias" [out], layer by layer.
// Each step the trainer pulls them into host buffers, LoadParameters()
// uploads them, TrainStep() computes the mean-loss gradients of a batch and
// downloads them into host buffers for the push.
//
// Not thread-safe: one trainer thread per model.
#ifndef PSFLOW_WORKER_MODEL_MLP_H_
#define PSFLOW_WORKER_MODEL_MLP_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/placement.h"
#include "worker/device/device.h"

namespace psflow {

struct MlpSpec {
  int64_t input_size = 0;
  std::vector<int64_t> hidden_sizes;  // empty: softmax regression
  int64_t num_classes = 0;
  Activation activation = Activation::kRelu;
};

// InvalidArgument naming the field for sizes that are not positive.
absl::Status ValidateMlpSpec(const MlpSpec& spec);

// The model's variables, in layer order (kernel, then bias).
std::vector<LogicalVariable> MlpVariables(const MlpSpec& spec);

// Initial values in MlpVariables() order: Glorot-uniform kernels, zero
// biases, determined by `seed` alone (the chief assigns them once).
std::vector<std::vector<float>> MlpInitialValues(const MlpSpec& spec,
                                                 uint64_t seed);

// Sums over a batch.
struct BatchStats {
  double loss_sum = 0;
  int64_t correct = 0;
  int64_t examples = 0;
};

class Mlp {
 public:
  // Allocates device memory for batches of up to `max_batch` examples.
  static absl::StatusOr<std::unique_ptr<Mlp>> Create(const MlpSpec& spec,
                                                     Device* device,
                                                     int64_t max_batch);

  // Uploads parameters, one span per variable in MlpVariables() order.
  // Spans in memory from Device::AllocateHost are copied asynchronously:
  // leave them unchanged until the next TrainStep or Evaluate returns.
  absl::Status LoadParameters(
      const std::vector<absl::Span<const float>>& parameters);

  // Forward and backward on `size` examples (features row-major, labels as
  // class ids): writes d(mean loss)/d(parameter) into `gradients` (one span
  // per variable) and returns the batch's loss and accuracy sums. Each
  // layer's gradients start copying out as soon as they are computed;
  // host memory from Device::AllocateHost makes that overlap the rest.
  absl::StatusOr<BatchStats> TrainStep(
      int64_t size, absl::Span<const float> features,
      absl::Span<const int32_t> labels,
      const std::vector<absl::Span<float>>& gradients);

  // Forward only; the predicted class of each example goes to
  // `predictions` when it is non-empty.
  absl::StatusOr<BatchStats> Evaluate(int64_t size,
                                      absl::Span<const float> features,
                                      absl::Span<const int32_t> labels,
                                      absl::Span<int32_t> predictions);

  const MlpSpec& spec() const { return spec_; }

 private:
  Mlp(const MlpSpec& spec, Device* device, int64_t max_batch)
      : spec_(spec), device_(device), max_batch_(max_batch) {}
  absl::Status Forward(int64_t size, absl::Span<const float> features,
                       absl::Span<const int32_t> labels, bool with_gradient);
  absl::StatusOr<BatchStats> Stats(int64_t size);

  const MlpSpec spec_;
  Device* const device_;
  const int64_t max_batch_;
  std::vector<int64_t> widths_;  // input, hidden..., classes
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

#endif  // PSFLOW_WORKER_MODEL_MLP_H_
