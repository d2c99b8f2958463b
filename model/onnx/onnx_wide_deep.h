// The `wide_deep` model kind (model/graph/wide_deep_graph.cc) as ONNX
// nodes: the deep part's input (every field's pooled "embedding" rows,
// field by field, then the transformed dense features) through its ReLU MLP to
// one logit, plus the wide part (every id's "linear" row summed, and the dense
// features times wide/kernel plus wide/bias). The inputs are a CRITEO graph's:
// "dense" and "ids" (onnx_inputs.h).
//
// Stateless.
#ifndef PSFLOW_MODEL_ONNX_ONNX_WIDE_DEEP_H_
#define PSFLOW_MODEL_ONNX_ONNX_WIDE_DEEP_H_

#include <string>

#include "absl/status/statusor.h"
#include "model/model.h"
#include "model/onnx/onnx_builder.h"
#include "proto/job_config.pb.h"

namespace psflow {

// The logit [batch, 1] of `definition`, defined from `config`
// (config.wide_deep()) for `input`.
absl::StatusOr<std::string> EmitWideDeep(OnnxBuilder& b,
                                         const ModelConfig& config,
                                         const InputSpec& input,
                                         const ModelDefinition& definition);

}  // namespace psflow

#endif  // PSFLOW_MODEL_ONNX_ONNX_WIDE_DEEP_H_
