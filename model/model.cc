#include "model/model.h"

namespace psflow {

std::vector<LogicalVariable> LogicalVariables(
    const std::vector<ModelVariable>& variables) {
  std::vector<LogicalVariable> out;
  out.reserve(variables.size());
  for (const ModelVariable& v : variables) out.push_back(v.variable);
  return out;
}

int64_t InputSpec::num_features() const {
  int64_t n = 1;
  for (int64_t d : example_shape) n *= d;
  return n;
}

}  // namespace psflow
