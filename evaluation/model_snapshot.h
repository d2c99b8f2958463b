// The live model's variables as one consistent snapshot per chunk, pulled
// for an evaluation (image and click-through-rate models alike).
#ifndef PSFLOW_EVALUATION_MODEL_SNAPSHOT_H_
#define PSFLOW_EVALUATION_MODEL_SNAPSHOT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "client/ps_client.h"
#include "model/model.h"

namespace psflow {

struct ModelSnapshot {
  std::vector<std::vector<float>> values;  // in the model's variable order
  int64_t global_step = 0;                 // the lowest chunk version read
};

absl::StatusOr<ModelSnapshot> PullModelSnapshot(
    const ModelDefinition& definition, ParameterClient& client);

}  // namespace psflow

#endif  // PSFLOW_EVALUATION_MODEL_SNAPSHOT_H_
