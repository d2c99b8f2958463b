// `psctl ckpt export --format=onnx`: a checkpoint's values put into its
// model's ONNX graph (model/onnx/onnx_export.h) and written to a file.
//
// Stateless functions.
#ifndef PSFLOW_CLIENT_PSCTL_ONNX_CHECKPOINT_EXPORT_H_
#define PSFLOW_CLIENT_PSCTL_ONNX_CHECKPOINT_EXPORT_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "checkpoint/reader.h"
#include "client/psctl/checkpoint_model.h"
#include "model/onnx/onnx_builder.h"

namespace psflow {

// The checkpoint's values as the ONNX exporter asks for them: each
// variable CRC-checked and of the shape the model declares (else
// FailedPrecondition naming it and saying the model does not match), each
// table's rows sorted by id (DataLoss for an id saved twice). `reader`
// must outlive the result.
OnnxWeights CheckpointWeights(const CheckpointReader& reader);

// Builds `model`'s ONNX graph with the checkpoint's values and `metadata`
// in its metadata_props, and writes it to `out_path` atomically (a
// failure leaves no file). Returns a line naming the inputs and outputs.
absl::StatusOr<std::string> ExportOnnx(
    const CheckpointReader& reader, const CheckpointModelInfo& model,
    const std::map<std::string, std::string>& metadata,
    const std::string& out_path);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_ONNX_CHECKPOINT_EXPORT_H_
