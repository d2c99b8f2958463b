// The model registry: every model kind of the job config's `model` oneof
// (proto/job_config.proto), mapped to the code that defines it. This is
// the only place roles turn a job config into a model; a new kind adds an
// entry here, its files in model/, and its message in the proto.
//
// Stateless; thread-safe.
#ifndef PSFLOW_MODEL_REGISTRY_H_
#define PSFLOW_MODEL_REGISTRY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "model/graph/legacy_graphs.h"
#include "model/model.h"
#include "proto/coordinator.pb.h"
#include "proto/job_config.pb.h"

namespace psflow {

// Checks what can be checked without the data (layer sizes, options):
// InvalidArgument naming the field and the fix; also for a config that
// sets no kind, or a kind this build does not know.
absl::Status ValidateModelConfig(const ModelConfig& config);

// The model `config` describes, for inputs of `input`'s shape and classes.
// The same errors as ValidateModelConfig, plus InvalidArgument when the
// model cannot take that input.
absl::StatusOr<std::unique_ptr<ModelDefinition>> DefineModel(
    const ModelConfig& config, const InputSpec& input);

// The graph a config's model runs as: a `graph` config's own, or the
// translation of an older kind (model/graph/legacy_graphs.h). The same
// errors as DefineModel, for what the graph's checks leave to Create.
// DefineModel defines this graph; exports (model/onnx/) write it.
absl::StatusOr<LegacyGraph> ModelGraph(const ModelConfig& config,
                                       const InputSpec& input);

// The model of a running job: its config's model for the input the chief
// read from the training data (JobSpec.example_shape, num_classes).
absl::StatusOr<std::unique_ptr<ModelDefinition>> DefineJobModel(
    const JobSpec& spec);

}  // namespace psflow

#endif  // PSFLOW_MODEL_REGISTRY_H_
