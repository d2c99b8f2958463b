// A `model.graph` node (model/graph/graph_spec.h) as ONNX nodes: the
// layers that read several inputs (Concatenate, Add, Multiply,
// DotInteraction, Cross, FactorizationMachine), computed in the order
// psflow's kernels (model/graph/node_kernels.cc) compute them, and the
// single-input layers through onnx_layers.h.
//
// Stateless functions.
#ifndef PSFLOW_MODEL_ONNX_ONNX_NODES_H_
#define PSFLOW_MODEL_ONNX_ONNX_NODES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/graph/graph_spec.h"
#include "model/onnx/onnx_builder.h"
#include "proto/job_config.pb.h"

namespace psflow {

// `node` (whose config is `layer`) reading the values named `inputs` (in
// node.inputs order, each [batch] + its shape); returns the output's name
// (`node.name` made unique; [batch] + node.output).
absl::StatusOr<std::string> EmitGraphNode(
    OnnxBuilder& b, const GraphNode& node, const LayerConfig& layer,
    const std::vector<std::string>& inputs);

}  // namespace psflow

#endif  // PSFLOW_MODEL_ONNX_ONNX_NODES_H_
