// The single-input layers of model/layers/ (a `model.layers` network's, and
// a graph's layer nodes) as ONNX nodes, in inference form: Dense, Conv2D,
// BatchNormalization (the moving statistics), Activation/ReLU, MaxPooling2D,
// AveragePooling2D, GlobalAveragePooling2D, Flatten, Reshape, Rescaling,
// and Dropout (the identity, as in inference).
//
// psflow's tensors are NHWC; ONNX's Conv and pooling are NCHW, so those
// layers transpose in and out (runtimes fold the pairs away). Variables
// keep their checkpoint names and layouts (a Conv2D kernel stays [kh, kw,
// in, out]; a Transpose node feeds ONNX its [out, in, kh, kw]), so an
// exported model's initializers are the checkpoint's tensors as they are.
//
// Stateless functions.
#ifndef PSFLOW_MODEL_ONNX_ONNX_LAYERS_H_
#define PSFLOW_MODEL_ONNX_ONNX_LAYERS_H_

#include <string>

#include "absl/status/statusor.h"
#include "model/device/device.h"
#include "model/layers/layer.h"
#include "model/onnx/onnx_builder.h"
#include "proto/job_config.pb.h"

namespace psflow {

// `x` ([batch] + layer.input_shape()) through `layer`, which
// layer_factory.h built from `config`; returns the output's name (`output`
// made unique; [batch] + layer.output_shape()).
absl::StatusOr<std::string> EmitLayer(OnnxBuilder& b, const LayerConfig& config,
                                      const Layer& layer, const std::string& x,
                                      const std::string& output);

// `x` through `activation` (the identity for kNone).
std::string EmitActivation(OnnxBuilder& b, Activation activation,
                           const std::string& x, const std::string& output);

// A Dense layer: x [batch, in] times `kernel` [in, out], plus `bias` [out]
// when not empty, through `activation`.
std::string EmitDense(OnnxBuilder& b, const std::string& x,
                      const std::string& kernel, const std::string& bias,
                      Activation activation, const std::string& output);

// Reshapes `x` to [batch] + `shape`.
std::string EmitReshape(OnnxBuilder& b, const std::string& x,
                        const Shape& shape, const std::string& output);

}  // namespace psflow

#endif  // PSFLOW_MODEL_ONNX_ONNX_LAYERS_H_
