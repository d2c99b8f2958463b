#include "model/model.h"

namespace psflow {

std::vector<LogicalVariable> LogicalVariables(
    const std::vector<ModelVariable>& variables) {
  std::vector<LogicalVariable> out;
  out.reserve(variables.size());
  for (const ModelVariable& v : variables) out.push_back(v.variable);
  return out;
}

const std::vector<ModelTable>& ModelDefinition::tables() const {
  static const auto* none = new std::vector<ModelTable>();
  return *none;
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
