// Turns `model.layers` (proto/job_config.proto LayerConfig) into Layers:
// checks each layer's arguments, names the layers as Keras does, and infers
// every layer's shape from the example shape, so that a mistake is an
// InvalidArgument naming the layer's index, class and the fix before any
// task starts. Stateless.
#ifndef PSFLOW_MODEL_LAYERS_LAYER_FACTORY_H_
#define PSFLOW_MODEL_LAYERS_LAYER_FACTORY_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "model/layers/layer.h"
#include "proto/job_config.pb.h"

namespace psflow {

using LayerConfigs = google::protobuf::RepeatedPtrField<LayerConfig>;

// Keras' class name of the layer, as in the JSON ("Conv2D").
std::string LayerClassName(const LayerConfig& config);

// Whether the layer reads several inputs (Concatenate, Add, Multiply,
// DotInteraction, Cross, FactorizationMachine): those exist only in graph
// models (model/graph/graph_spec.h), which build them themselves.
bool ReadsSeveralInputs(const LayerConfig& config);

// 1 to 64 letters, digits, '_', '-' or '.'.
bool ValidLayerName(const std::string& name);

// One single-input layer named `name` on inputs of shape `input`;
// InvalidArgument saying what is wrong (without a location: the caller
// names the layer).
absl::StatusOr<std::unique_ptr<Layer>> BuildLayer(const LayerConfig& config,
                                                  const std::string& name,
                                                  const Shape& input);

// The checks that need no shapes: every layer's arguments and names.
absl::Status ValidateLayerConfigs(const LayerConfigs& layers);

// The layers for examples of `example_shape` ([h, w] images are taken as
// [h, w, 1]); the last must output the `num_classes` logits.
absl::StatusOr<std::vector<std::unique_ptr<Layer>>> BuildLayers(
    const LayerConfigs& layers, const Shape& example_shape,
    int64_t num_classes);

}  // namespace psflow

#endif  // PSFLOW_MODEL_LAYERS_LAYER_FACTORY_H_
