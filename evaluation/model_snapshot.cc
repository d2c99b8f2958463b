#include "evaluation/model_snapshot.h"

#include "common/status_macros.h"

namespace psflow {

absl::StatusOr<ModelSnapshot> PullModelSnapshot(
    const ModelDefinition& definition, ParameterClient& client) {
  const std::vector<ModelVariable>& vars = definition.variables();
  ModelSnapshot snapshot;
  std::vector<ParameterClient::Mutable> targets;
  for (const ModelVariable& v : vars) {
    snapshot.values.emplace_back(v.num_elements());
  }
  for (size_t i = 0; i < vars.size(); ++i) {
    targets.emplace_back(vars[i].name(), absl::MakeSpan(snapshot.values[i]));
  }
  auto pull = client.Pull(targets, 0, /*consistent_snapshot=*/true);
  RETURN_IF_ERROR(pull->Wait());
  snapshot.global_step = pull->min_version();
  return snapshot;
}

}  // namespace psflow
