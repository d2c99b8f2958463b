#include "model/mlp.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace psflow {
absl::StatusOr<std::unique_ptr<MlpDefinition>> MlpDefinition::Create(
    const MlpSpec& spec, const InputSpec& input) {
  bool positive = !input.example_shape.empty();
  for (int64_t d : input.example_shape) positive = positive && d > 0;
  if (!positive) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model input shape is [", absl::StrJoin(input.example_shape, ", "),
        "]; every dimension must be positive"));
  }
  if (input.num_classes < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("model has ", input.num_classes,
                     " classes; a classifier needs 2 or more"));
  }
  for (size_t i = 0; i < spec.hidden_sizes.size(); ++i) {
    if (spec.hidden_sizes[i] <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.mlp.hidden_sizes[", i, "] is ", spec.hidden_sizes[i],
          "; layer widths must be positive"));
    }
  }
  return std::unique_ptr<MlpDefinition>(new MlpDefinition(spec, input));
}

MlpDefinition::MlpDefinition(const MlpSpec& spec, const InputSpec& input)
    : ModelDefinition(input), spec_(spec) {
  widths_ = {input.num_features()};
  widths_.insert(widths_.end(), spec.hidden_sizes.begin(),
                 spec.hidden_sizes.end());
  widths_.push_back(input.num_classes);
  for (size_t l = 0; l + 1 < widths_.size(); ++l) {
    variables_.push_back(
        {{absl::StrCat("dense_", l, "/kernel"), {widths_[l], widths_[l + 1]}},
         Initializer::kGlorotUniform});
    variables_.push_back(
        {{absl::StrCat("dense_", l, "/bias"), {widths_[l + 1]}},
         Initializer::kZeros});
  }
}

std::string MlpDefinition::Describe() const {
  return absl::StrCat(
      spec_.hidden_sizes.empty() ? "softmax regression " : "mlp ",
      absl::StrJoin(widths_, "-"),
      spec_.hidden_sizes.empty()
          ? ""
          : absl::StrCat(" ", ActivationName(spec_.activation)));
}

absl::StatusOr<std::unique_ptr<Model>> MlpDefinition::Instantiate(
    Device* device, int64_t max_batch) const {
  if (max_batch <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch size is ", max_batch, "; it must be positive"));
  }
  std::unique_ptr<Mlp> mlp(new Mlp(*this, device, max_batch));
  RETURN_IF_ERROR(mlp->Allocate());
  return std::unique_ptr<Model>(std::move(mlp));
}

std::vector<ModelPart> MlpDefinition::MemoryParts() const {
  // As Mlp::Allocate: every width's activations and their gradients.
  std::vector<ModelPart> parts = {{"input", 0, 2 * widths_[0]}};
  for (size_t l = 0; l + 1 < widths_.size(); ++l) {
    parts.push_back({absl::StrCat("dense_", l + 1),
                     widths_[l] * widths_[l + 1] + widths_[l + 1],
                     2 * widths_[l + 1]});
  }
  return parts;
}

absl::Status Mlp::Allocate() {
  const auto& w = widths_;
  for (size_t l = 0; l + 1 < w.size(); ++l) {
    for (auto* list : {&kernels_, &kernel_grads_}) {
      ASSIGN_OR_RETURN(auto array, device_->Allocate(w[l] * w[l + 1]));
      list->push_back(std::move(array));
    }
    for (auto* list : {&biases_, &bias_grads_}) {
      ASSIGN_OR_RETURN(auto array, device_->Allocate(w[l + 1]));
      list->push_back(std::move(array));
    }
  }
  for (int64_t width : w) {
    ASSIGN_OR_RETURN(auto a, device_->Allocate(max_batch_ * width));
    activations_.push_back(std::move(a));
    ASSIGN_OR_RETURN(auto g, device_->Allocate(max_batch_ * width));
    activation_grads_.push_back(std::move(g));
  }
  ASSIGN_OR_RETURN(labels_, device_->Allocate(max_batch_));
  ASSIGN_OR_RETURN(predictions_, device_->Allocate(max_batch_));
  ASSIGN_OR_RETURN(stats_, device_->Allocate(2));
  ASSIGN_OR_RETURN(stats_staging_, device_->AllocateHost(2));
  label_staging_.resize(max_batch_);
  return absl::OkStatus();
}

absl::Status Mlp::LoadParameters(
    const std::vector<absl::Span<const float>>& parameters) {
  if (parameters.size() != 2 * kernels_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model takes ", 2 * kernels_.size(),
                     " parameter arrays, got ", parameters.size()));
  }
  for (size_t l = 0; l < kernels_.size(); ++l) {
    for (auto [span, array] :
         {std::pair{parameters[2 * l], kernels_[l].get()},
          std::pair{parameters[2 * l + 1], biases_[l].get()}}) {
      if (static_cast<int64_t>(span.size()) != array->size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("parameter for layer ", l, " has ", span.size(),
                         " values, the model needs ", array->size()));
      }
      RETURN_IF_ERROR(device_->Upload(span, *array));
    }
  }
  return absl::OkStatus();
}

absl::Status Mlp::Forward(const ExampleBatch& batch, bool with_gradient) {
  const int64_t size = batch.size;
  const absl::Span<const float> features = batch.features;
  const absl::Span<const int32_t> labels = batch.labels;
  if (size <= 0 || size > max_batch_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch of ", size, " examples; this model takes 1 to ", max_batch_));
  }
  if (static_cast<int64_t>(features.size()) != size * widths_[0] ||
      static_cast<int64_t>(labels.size()) != size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch of ", size, " examples has ", features.size(),
        " feature values and ", labels.size(), " labels; the model takes ",
        widths_[0], " features per example"));
  }
  for (int64_t i = 0; i < size; ++i) label_staging_[i] = labels[i];
  RETURN_IF_ERROR(device_->Upload(features, *activations_[0]));
  RETURN_IF_ERROR(device_->Upload(
      absl::MakeConstSpan(label_staging_.data(), size), *labels_));
  const size_t layers = kernels_.size();
  for (size_t l = 0; l < layers; ++l) {
    RETURN_IF_ERROR(device_->Gemm(false, false, size, widths_[l + 1],
                                  widths_[l], 1.0f, *activations_[l],
                                  *kernels_[l], 0.0f, *activations_[l + 1]));
    RETURN_IF_ERROR(device_->BiasActivation(
        size, widths_[l + 1], *biases_[l],
        l + 1 == layers ? Activation::kNone : activation_,
        *activations_[l + 1]));
  }
  return device_->SoftmaxCrossEntropy(
      size, widths_.back(), *activations_[layers], *labels_,
      with_gradient ? activation_grads_[layers].get() : nullptr, *predictions_,
      *stats_);
}

absl::StatusOr<BatchStats> Mlp::Stats(int64_t size) {
  // Also waits for every download queued before it.
  absl::Span<float> stats = stats_staging_->span();
  RETURN_IF_ERROR(device_->DownloadAsync(*stats_, stats));
  RETURN_IF_ERROR(device_->Synchronize());
  return BatchStats{stats[0], static_cast<int64_t>(stats[1]), size};
}

absl::StatusOr<BatchStats> Mlp::TrainStep(
    const ExampleBatch& batch,
    const std::vector<absl::Span<float>>& gradients) {
  const int64_t size = batch.size;
  if (gradients.size() != 2 * kernels_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model produces ", 2 * kernels_.size(),
                     " gradient arrays, got ", gradients.size(), " buffers"));
  }
  for (size_t l = 0; l < kernels_.size(); ++l) {
    if (static_cast<int64_t>(gradients[2 * l].size()) !=
            kernel_grads_[l]->size() ||
        static_cast<int64_t>(gradients[2 * l + 1].size()) !=
            bias_grads_[l]->size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gradient buffers for layer ", l, " have the wrong size"));
    }
  }
  RETURN_IF_ERROR(Forward(batch, /*with_gradient=*/true));
  for (size_t l = kernels_.size(); l-- > 0;) {
    const int64_t in = widths_[l], out = widths_[l + 1];
    DeviceArray& grad_out = *activation_grads_[l + 1];
    // dW = A^T dZ, db = column sums of dZ, dA_prev = dZ W^T.
    RETURN_IF_ERROR(device_->Gemm(true, false, in, out, size, 1.0f,
                                  *activations_[l], grad_out, 0.0f,
                                  *kernel_grads_[l]));
    RETURN_IF_ERROR(device_->ColumnSums(size, out, grad_out, *bias_grads_[l]));
    // This layer's gradients are final: their copy to the host overlaps
    // the layers below on devices that copy asynchronously.
    RETURN_IF_ERROR(
        device_->DownloadAsync(*kernel_grads_[l], gradients[2 * l]));
    RETURN_IF_ERROR(
        device_->DownloadAsync(*bias_grads_[l], gradients[2 * l + 1]));
    if (l > 0) {
      RETURN_IF_ERROR(device_->Gemm(false, true, size, in, out, 1.0f, grad_out,
                                    *kernels_[l], 0.0f, *activation_grads_[l]));
      RETURN_IF_ERROR(device_->ActivationBackward(
          size * in, activation_, *activations_[l], *activation_grads_[l]));
    }
  }
  return Stats(size);
}

absl::StatusOr<BatchStats> Mlp::Evaluate(const ExampleBatch& batch,
                                         absl::Span<int32_t> predictions) {
  const int64_t size = batch.size;
  RETURN_IF_ERROR(Forward(batch, /*with_gradient=*/false));
  if (!predictions.empty() && static_cast<int64_t>(predictions.size()) < size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "room for ", predictions.size(), " predictions for a batch of ", size));
  }
  std::vector<float> staged;
  if (!predictions.empty()) {
    staged.resize(size);
    RETURN_IF_ERROR(
        device_->DownloadAsync(*predictions_, absl::MakeSpan(staged)));
  }
  ASSIGN_OR_RETURN(BatchStats stats, Stats(size));
  for (int64_t i = 0; i < static_cast<int64_t>(staged.size()) &&
                      i < static_cast<int64_t>(predictions.size());
       ++i) {
    predictions[i] = static_cast<int32_t>(staged[i]);
  }
  return stats;
}

}  // namespace psflow
