#include "model/model.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace psflow {

std::vector<LogicalVariable> LogicalVariables(
    const std::vector<ModelVariable>& variables) {
  std::vector<LogicalVariable> out;
  out.reserve(variables.size());
  for (const ModelVariable& v : variables) out.push_back(v.variable);
  return out;
}

absl::Status CheckParameterSpans(
    const std::vector<absl::Span<const float>>& parameters,
    const std::vector<std::shared_ptr<DeviceArray>>& values) {
  if (parameters.size() != values.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model takes ", values.size(), " parameter arrays, got ",
                     parameters.size()));
  }
  for (size_t v = 0; v < values.size(); ++v) {
    if (static_cast<int64_t>(parameters[v].size()) != values[v]->size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter ", v, " has ", parameters[v].size(),
                       " values, the model needs ", values[v]->size()));
    }
  }
  return absl::OkStatus();
}

absl::Status UploadParameters(
    Device& device, const std::vector<absl::Span<const float>>& parameters,
    const std::vector<std::shared_ptr<DeviceArray>>& values) {
  absl::Status checked = CheckParameterSpans(parameters, values);
  if (!checked.ok()) return checked;
  for (size_t v = 0; v < values.size(); ++v) {
    absl::Status uploaded = device.Upload(parameters[v], *values[v]);
    if (!uploaded.ok()) return uploaded;
  }
  return absl::OkStatus();
}

absl::Status CheckGradientBuffers(
    const std::vector<absl::Span<float>>& buffers,
    const std::vector<std::shared_ptr<DeviceArray>>& gradients) {
  if (buffers.size() != gradients.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model produces ", gradients.size(),
                     " gradient arrays, got ", buffers.size(), " buffers"));
  }
  for (size_t v = 0; v < gradients.size(); ++v) {
    if (static_cast<int64_t>(buffers[v].size()) != gradients[v]->size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("gradient buffer ", v, " has ", buffers[v].size(),
                       " values, the variable ", gradients[v]->size()));
    }
  }
  return absl::OkStatus();
}

const std::vector<ModelTable>& ModelDefinition::tables() const {
  static const auto* none = new std::vector<ModelTable>();
  return *none;
}

int64_t ModelPart::FloatsForBatch(int64_t batch) const {
  // Every part of a model that passed validation is far below these; an
  // absurd batch saturates (the estimate then refuses the job).
  constexpr int64_t kSaturated = INT64_MAX / 8;
  auto times = [&](int64_t per_example) {
    return per_example > 0 && batch > kSaturated / per_example
               ? kSaturated
               : per_example * batch;
  };
  const int64_t uncapped_scratch = times(scratch_per_example);
  const int64_t scratch = scratch_cap > 0
                              ? std::min(uncapped_scratch, scratch_cap)
                              : uncapped_scratch;
  return std::min(kSaturated,
                  times(floats_per_example - scratch_per_example) + scratch);
}

std::vector<ModelPart> ModelDefinition::MemoryParts() const {
  ModelPart all{"model", 0, 0};
  for (const ModelVariable& v : variables()) all.parameters += v.num_elements();
  return {all};
}

absl::StatusOr<BatchStats> Model::Score(const ExampleBatch&,
                                        absl::Span<float>) {
  return absl::UnimplementedError(
      "this model predicts classes, not one probability; AUC and log loss "
      "need a binary model (kind wide_deep)");
}

int64_t InputSpec::num_features() const {
  int64_t n = 1;
  for (int64_t d : example_shape) n *= d;
  return n;
}

}  // namespace psflow
