#include "model/sequential.h"

#include "absl/strings/str_cat.h"
#include "common/splitmix64.h"
#include "common/status_macros.h"

namespace psflow {
namespace {

class Sequential final : public Model {
 public:
  Sequential(const SequentialDefinition& definition, Device* device,
             int64_t max_batch)
      : device_(device), max_batch_(max_batch) {
    features_ = definition.input().num_features();
    classes_ = definition.input().num_classes;
    for (const auto& layer : definition.layers()) {
      widths_.push_back(NumElements(layer->output_shape()));
      variable_counts_.push_back(layer->variables().size());
    }
  }

  absl::Status Allocate(const SequentialDefinition& definition) {
    for (const ModelVariable& v : definition.variables()) {
      ASSIGN_OR_RETURN(auto value, device_->Allocate(v.num_elements()));
      ASSIGN_OR_RETURN(auto gradient, device_->Allocate(v.num_elements()));
      values_.push_back(std::move(value));
      gradients_.push_back(std::move(gradient));
    }
    ASSIGN_OR_RETURN(auto input, device_->Allocate(max_batch_ * features_));
    activations_.push_back(std::move(input));
    activation_grads_.push_back(nullptr);  // nobody needs d(loss)/d(input)
    size_t first = 0;
    for (size_t l = 0; l < widths_.size(); ++l) {
      ASSIGN_OR_RETURN(auto out, device_->Allocate(max_batch_ * widths_[l]));
      ASSIGN_OR_RETURN(auto grad, device_->Allocate(max_batch_ * widths_[l]));
      activations_.push_back(std::move(out));
      activation_grads_.push_back(std::move(grad));
      LayerArrays arrays;
      for (size_t v = first; v < first + variable_counts_[l]; ++v) {
        arrays.values.push_back(values_[v].get());
        arrays.gradients.push_back(gradients_[v].get());
      }
      first += variable_counts_[l];
      ASSIGN_OR_RETURN(auto kernel, definition.layers()[l]->Instantiate(
                                        device_, max_batch_, arrays));
      kernels_.push_back(std::move(kernel));
    }
    ASSIGN_OR_RETURN(labels_, device_->Allocate(max_batch_));
    ASSIGN_OR_RETURN(predictions_, device_->Allocate(max_batch_));
    ASSIGN_OR_RETURN(stats_, device_->Allocate(2));
    ASSIGN_OR_RETURN(stats_staging_, device_->AllocateHost(2));
    label_staging_.resize(max_batch_);
    return absl::OkStatus();
  }

  absl::Status LoadParameters(
      const std::vector<absl::Span<const float>>& parameters) override {
    return UploadParameters(*device_, parameters, values_);
  }

  absl::StatusOr<BatchStats> TrainStep(
      const ExampleBatch& batch,
      const std::vector<absl::Span<float>>& gradients) override {
    RETURN_IF_ERROR(CheckGradientBuffers(gradients, gradients_));
    RETURN_IF_ERROR(Forward(batch, /*training=*/true));
    size_t first = gradients_.size();
    for (size_t l = kernels_.size(); l-- > 0;) {
      RETURN_IF_ERROR(kernels_[l]->Backward(
          Step(batch, true, l), *activations_[l], *activations_[l + 1],
          *activation_grads_[l + 1], activation_grads_[l].get()));
      // This layer's gradients are final: their copy to the host overlaps
      // the layers below on devices that copy asynchronously.
      first -= variable_counts_[l];
      for (size_t v = first; v < first + variable_counts_[l]; ++v) {
        RETURN_IF_ERROR(device_->DownloadAsync(*gradients_[v], gradients[v]));
      }
    }
    return Stats(batch.size);
  }

  absl::StatusOr<BatchStats> Evaluate(
      const ExampleBatch& batch, absl::Span<int32_t> predictions) override {
    if (!predictions.empty() &&
        static_cast<int64_t>(predictions.size()) < batch.size) {
      return absl::InvalidArgumentError(
          absl::StrCat("room for ", predictions.size(),
                       " predictions for a batch of ", batch.size));
    }
    RETURN_IF_ERROR(Forward(batch, /*training=*/false));
    std::vector<float> staged;
    if (!predictions.empty()) {
      staged.resize(batch.size);
      RETURN_IF_ERROR(
          device_->DownloadAsync(*predictions_, absl::MakeSpan(staged)));
    }
    ASSIGN_OR_RETURN(BatchStats stats, Stats(batch.size));
    for (size_t i = 0; i < staged.size(); ++i) {
      predictions[i] = static_cast<int32_t>(staged[i]);
    }
    return stats;
  }

 private:
  // Layer l's settings for this batch; its randomness mixes the batch's
  // seed with the layer's position, so two dropout layers differ.
  StepContext Step(const ExampleBatch& batch, bool training, size_t l) const {
    uint64_t state = batch.seed ^ (0xd1b54a32d192ed03ull * (l + 1));
    return StepContext{batch.size, training, SplitMix64(state)};
  }

  absl::Status Forward(const ExampleBatch& batch, bool training) {
    const int64_t size = batch.size;
    if (size <= 0 || size > max_batch_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "batch of ", size, " examples; this model takes 1 to ", max_batch_));
    }
    if (static_cast<int64_t>(batch.features.size()) != size * features_ ||
        static_cast<int64_t>(batch.labels.size()) != size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "batch of ", size, " examples has ", batch.features.size(),
          " feature values and ", batch.labels.size(),
          " labels; the model takes ", features_, " features per example"));
    }
    for (int64_t i = 0; i < size; ++i) label_staging_[i] = batch.labels[i];
    RETURN_IF_ERROR(device_->Upload(batch.features, *activations_[0]));
    RETURN_IF_ERROR(device_->Upload(
        absl::MakeConstSpan(label_staging_.data(), size), *labels_));
    for (size_t l = 0; l < kernels_.size(); ++l) {
      RETURN_IF_ERROR(kernels_[l]->Forward(
          Step(batch, training, l), *activations_[l], *activations_[l + 1]));
    }
    return device_->SoftmaxCrossEntropy(
        size, classes_, *activations_.back(), *labels_,
        training ? activation_grads_.back().get() : nullptr, *predictions_,
        *stats_);
  }

  absl::StatusOr<BatchStats> Stats(int64_t size) {
    // Also waits for every download queued before it.
    absl::Span<float> stats = stats_staging_->span();
    RETURN_IF_ERROR(device_->DownloadAsync(*stats_, stats));
    RETURN_IF_ERROR(device_->Synchronize());
    return BatchStats{stats[0], static_cast<int64_t>(stats[1]), size};
  }

  Device* const device_;
  const int64_t max_batch_;
  int64_t features_ = 0, classes_ = 0;
  std::vector<int64_t> widths_;          // per layer: outputs per example
  std::vector<size_t> variable_counts_;  // per layer
  std::vector<std::unique_ptr<LayerKernel>> kernels_;
  // Per variable, in the definition's order.
  std::vector<std::shared_ptr<DeviceArray>> values_, gradients_;
  // activations_[0] is the input; activations_[l + 1] layer l's output.
  std::vector<std::shared_ptr<DeviceArray>> activations_, activation_grads_;
  std::shared_ptr<DeviceArray> labels_, predictions_, stats_;
  std::shared_ptr<HostBuffer> stats_staging_;
  std::vector<float> label_staging_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SequentialDefinition>>
SequentialDefinition::Create(const LayerConfigs& layers,
                             const InputSpec& input) {
  for (int64_t d : input.example_shape) {
    if (d < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model input shape is ", ShapeString(input.example_shape),
          "; every dimension must be positive"));
    }
  }
  if (input.num_classes < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("model has ", input.num_classes,
                     " classes; a classifier needs 2 or more"));
  }
  ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Layer>> built,
                   BuildLayers(layers, input.example_shape, input.num_classes));
  return std::unique_ptr<SequentialDefinition>(
      new SequentialDefinition(input, std::move(built)));
}

SequentialDefinition::SequentialDefinition(
    const InputSpec& input, std::vector<std::unique_ptr<Layer>> layers)
    : ModelDefinition(input), layers_(std::move(layers)) {
  for (const auto& layer : layers_) {
    variables_.insert(variables_.end(), layer->variables().begin(),
                      layer->variables().end());
  }
}

std::string SequentialDefinition::Describe() const {
  int64_t parameters = 0;
  for (const ModelVariable& v : variables_) {
    if (v.trainable()) parameters += v.num_elements();
  }
  return absl::StrCat("layers ", ShapeString(input().example_shape), " -> ",
                      layers_.size(), " layers -> ", input().num_classes,
                      " classes, ", parameters, " trainable parameters");
}

std::vector<ModelPart> SequentialDefinition::MemoryParts() const {
  // As Sequential::Allocate: the input batch; per layer its output and
  // that output's gradient, and what its kernel allocates.
  std::vector<ModelPart> parts = {{"input", 0, input().num_features()}};
  for (const std::unique_ptr<Layer>& layer : layers_) {
    ModelPart part{layer->name(), 0,
                   2 * NumElements(layer->output_shape()) +
                       layer->ScratchFloatsPerExample()};
    for (const ModelVariable& v : layer->variables()) {
      part.parameters += v.num_elements();
    }
    parts.push_back(std::move(part));
  }
  return parts;
}

absl::StatusOr<std::unique_ptr<Model>> SequentialDefinition::Instantiate(
    Device* device, int64_t max_batch) const {
  if (max_batch <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch size is ", max_batch, "; it must be positive"));
  }
  auto model = std::make_unique<Sequential>(*this, device, max_batch);
  RETURN_IF_ERROR(model->Allocate(*this));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace psflow
