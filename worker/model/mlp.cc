#include "worker/model/mlp.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace psflow {
namespace {

// SplitMix64, as in the data pipeline: the same values on every platform.
uint64_t Next(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

absl::Status ValidateMlpSpec(const MlpSpec& spec) {
  if (spec.input_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model input size is ", spec.input_size, "; it must be positive"));
  }
  if (spec.num_classes < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("model has ", spec.num_classes,
                     " classes; a classifier needs 2 or "
                     "more"));
  }
  for (size_t i = 0; i < spec.hidden_sizes.size(); ++i) {
    if (spec.hidden_sizes[i] <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.mlp.hidden_sizes[", i, "] is ", spec.hidden_sizes[i],
          "; layer widths must be positive"));
    }
  }
  return absl::OkStatus();
}

std::vector<LogicalVariable> MlpVariables(const MlpSpec& spec) {
  std::vector<int64_t> widths = {spec.input_size};
  widths.insert(widths.end(), spec.hidden_sizes.begin(),
                spec.hidden_sizes.end());
  widths.push_back(spec.num_classes);
  std::vector<LogicalVariable> variables;
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    variables.push_back(
        {absl::StrCat("dense_", l, "/kernel"), {widths[l], widths[l + 1]}});
    variables.push_back({absl::StrCat("dense_", l, "/bias"), {widths[l + 1]}});
  }
  return variables;
}

std::vector<std::vector<float>> MlpInitialValues(const MlpSpec& spec,
                                                 uint64_t seed) {
  std::vector<std::vector<float>> values;
  uint64_t state = seed ^ 0x5eed5eed5eed5eedull;
  for (const LogicalVariable& v : MlpVariables(spec)) {
    int64_t n = 1;
    for (int64_t d : v.shape) n *= d;
    std::vector<float> value(n, 0.0f);
    if (v.shape.size() == 2) {
      // Glorot uniform: U(-limit, limit), limit = sqrt(6 / (in + out)).
      const double limit = std::sqrt(6.0 / (v.shape[0] + v.shape[1]));
      for (float& x : value) {
        const double u = (Next(state) >> 11) * (1.0 / 9007199254740992.0);
        x = static_cast<float>((2 * u - 1) * limit);
      }
    }
    values.push_back(std::move(value));
  }
  return values;
}

absl::StatusOr<std::unique_ptr<Mlp>> Mlp::Create(const MlpSpec& spec,
                                                 Device* device,
                                                 int64_t max_batch) {
  RETURN_IF_ERROR(ValidateMlpSpec(spec));
  if (max_batch <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch size is ", max_batch, "; it must be positive"));
  }
  std::unique_ptr<Mlp> mlp(new Mlp(spec, device, max_batch));
  mlp->widths_ = {spec.input_size};
  mlp->widths_.insert(mlp->widths_.end(), spec.hidden_sizes.begin(),
                      spec.hidden_sizes.end());
  mlp->widths_.push_back(spec.num_classes);
  const auto& w = mlp->widths_;
  for (size_t l = 0; l + 1 < w.size(); ++l) {
    for (auto* list : {&mlp->kernels_, &mlp->kernel_grads_}) {
      ASSIGN_OR_RETURN(auto array, device->Allocate(w[l] * w[l + 1]));
      list->push_back(std::move(array));
    }
    for (auto* list : {&mlp->biases_, &mlp->bias_grads_}) {
      ASSIGN_OR_RETURN(auto array, device->Allocate(w[l + 1]));
      list->push_back(std::move(array));
    }
  }
  for (int64_t width : w) {
    ASSIGN_OR_RETURN(auto a, device->Allocate(max_batch * width));
    mlp->activations_.push_back(std::move(a));
    ASSIGN_OR_RETURN(auto g, device->Allocate(max_batch * width));
    mlp->activation_grads_.push_back(std::move(g));
  }
  ASSIGN_OR_RETURN(mlp->labels_, device->Allocate(max_batch));
  ASSIGN_OR_RETURN(mlp->predictions_, device->Allocate(max_batch));
  ASSIGN_OR_RETURN(mlp->stats_, device->Allocate(2));
  ASSIGN_OR_RETURN(mlp->stats_staging_, device->AllocateHost(2));
  mlp->label_staging_.resize(max_batch);
  return mlp;
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

absl::Status Mlp::Forward(int64_t size, absl::Span<const float> features,
                          absl::Span<const int32_t> labels,
                          bool with_gradient) {
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
        l + 1 == layers ? Activation::kNone : spec_.activation,
        *activations_[l + 1]));
  }
  return device_->SoftmaxCrossEntropy(
      size, spec_.num_classes, *activations_[layers], *labels_,
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
    int64_t size, absl::Span<const float> features,
    absl::Span<const int32_t> labels,
    const std::vector<absl::Span<float>>& gradients) {
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
  RETURN_IF_ERROR(Forward(size, features, labels, /*with_gradient=*/true));
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
      RETURN_IF_ERROR(device_->ActivationBackward(size * in, spec_.activation,
                                                  *activations_[l],
                                                  *activation_grads_[l]));
    }
  }
  return Stats(size);
}

absl::StatusOr<BatchStats> Mlp::Evaluate(int64_t size,
                                         absl::Span<const float> features,
                                         absl::Span<const int32_t> labels,
                                         absl::Span<int32_t> predictions) {
  RETURN_IF_ERROR(Forward(size, features, labels, /*with_gradient=*/false));
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
