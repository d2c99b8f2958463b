// Which model a checkpoint's variables belong to, for exports that carry
// the architecture (`psctl ckpt export`): the model the checkpoint records
// (CheckpointIndex.model, written by the chief since the ONNX export came),
// or, for checkpoints written before, the model of a job config given with
// --job, defined for the input its data describe. Also the metadata that
// names the architecture and the layouts in safetensors and npz exports.
//
// Stateless functions.
#ifndef PSFLOW_CLIENT_PSCTL_CHECKPOINT_MODEL_H_
#define PSFLOW_CLIENT_PSCTL_CHECKPOINT_MODEL_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "model/model.h"
#include "proto/checkpoint.pb.h"
#include "proto/job_config.pb.h"

namespace psflow {

struct CheckpointModelInfo {
  ModelConfig config;
  InputSpec input;
  DataConfig::Format data_format = DataConfig::IDX;
  // Where it came from: "the checkpoint" or "--job=<path>".
  std::string source;
};

// With `job_path` non-empty, the model of that job config (its data's
// headers read for the input's shape; CRITEO's follows from the config),
// which wins over what the checkpoint records; otherwise the checkpoint's
// record. FailedPrecondition when the checkpoint records none and no
// --job was given, naming the flag; the config's and the data's errors
// otherwise.
absl::StatusOr<CheckpointModelInfo> ResolveCheckpointModel(
    const CheckpointIndex& index, const std::string& job_path);

// safetensors/npz metadata for `model`: "model" (the model config as
// proto3 JSON), "input" (JSON: the data format, example shape, classes,
// fields and the preprocessing the reader applies before the model),
// "layout" (how kernels, images and tables are laid out) and
// "model_source".
std::map<std::string, std::string> ExportMetadata(
    const CheckpointModelInfo& model);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_CHECKPOINT_MODEL_H_
