// A psflow model as an ONNX model that runs as it trained: the
// architecture (the job config's `model`, defined again through the
// registry), the trained values, the embedding tables with their id
// lookup, and the preprocessing the data reader applied (onnx_inputs.h).
// `psctl ckpt export --format=onnx` writes it; docs/models.md ("ONNX
// export") lists the inputs and outputs.
//
// The model uses ONNX opset 13 (and ai.onnx.ml 2 for the tables' id
// lookup), IR version 8: what ONNX 1.12 (Debian 12's python3-onnx)
// checks and ONNX Runtime runs.
//
// Outputs: "logits" [batch, classes] (one for a sigmoid model) and
// "probabilities" (softmax over the classes, or the sigmoid of the one
// logit).
//
// Stateless; thread-safe.
#ifndef PSFLOW_MODEL_ONNX_ONNX_EXPORT_H_
#define PSFLOW_MODEL_ONNX_ONNX_EXPORT_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "model/model.h"
#include "model/onnx/onnx_builder.h"
#include "onnx/onnx_pb.h"
#include "proto/job_config.pb.h"

namespace psflow {

// What to export, besides the values.
struct OnnxExportSpec {
  ModelConfig config;
  // The input the model was built for (the data's example shape, classes
  // and categorical fields).
  InputSpec input;
  // IDX images or CRITEO rows: which preprocessing goes into the graph.
  DataConfig::Format data_format = DataConfig::IDX;
  // The graph's name (the job's).
  std::string name;
  // Key-value pairs for the model's metadata_props.
  std::map<std::string, std::string> metadata;
};

// Image models' input.
inline constexpr char kOnnxPixelsInput[] = "pixels";

// The model, its values read through `weights`. InvalidArgument for a
// config the registry refuses or that does not suit the data; Unimplemented
// naming the layer or model kind that cannot be exported yet;
// OutOfRange when the model would pass protobuf's 2 GiB; the weight
// source's errors as they are.
absl::StatusOr<onnx::ModelProto> BuildOnnxModel(const OnnxExportSpec& spec,
                                                const OnnxWeights& weights);

}  // namespace psflow

#endif  // PSFLOW_MODEL_ONNX_ONNX_EXPORT_H_
