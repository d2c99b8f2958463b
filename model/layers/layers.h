// The layer types of `model.layers` (Keras names), each built from
// arguments that layer_factory.cc has already checked. A constructor
// returns InvalidArgument (without the layer's index, which the factory
// adds) when the input shape does not suit the layer.
#ifndef PSFLOW_MODEL_LAYERS_LAYERS_H_
#define PSFLOW_MODEL_LAYERS_LAYERS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/device/device.h"
#include "model/layers/layer.h"
#include "model/layers/window_plan.h"

namespace psflow {

// Conv2D: kernel [kh, kw, in_channels, filters] (Glorot uniform), bias
// [filters] (zeros) when use_bias; an im2col + GEMM on the device.
absl::StatusOr<std::unique_ptr<Layer>> MakeConv2D(
    std::string name, const Shape& input, int64_t filters,
    const Window2D& window, bool use_bias, Activation activation);

// Dense on a vector input: kernel [in, units], bias [units].
absl::StatusOr<std::unique_ptr<Layer>> MakeDense(std::string name,
                                                 const Shape& input,
                                                 int64_t units, bool use_bias,
                                                 Activation activation);

// BatchNormalization over the last axis: gamma (scale) and beta (center)
// trainable, moving_mean and moving_variance updated on the parameter
// servers as moving averages with `momentum`.
absl::StatusOr<std::unique_ptr<Layer>> MakeBatchNormalization(
    std::string name, const Shape& input, float momentum, float epsilon,
    bool center, bool scale);

absl::StatusOr<std::unique_ptr<Layer>> MakePooling2D(std::string name,
                                                     const Shape& input,
                                                     PoolKind kind,
                                                     const Window2D& window);

// The mean over height and width: [h, w, c] -> [c].
absl::StatusOr<std::unique_ptr<Layer>> MakeGlobalAveragePooling2D(
    std::string name, const Shape& input);

absl::StatusOr<std::unique_ptr<Layer>> MakeRescaling(std::string name,
                                                     const Shape& input,
                                                     float scale, float offset);

// Activation and ReLU layers.
absl::StatusOr<std::unique_ptr<Layer>> MakeActivation(std::string name,
                                                      const Shape& input,
                                                      Activation activation);

absl::StatusOr<std::unique_ptr<Layer>> MakeFlatten(std::string name,
                                                   const Shape& input);

// Reshape: the same values (a copy) in `output`'s shape.
absl::StatusOr<std::unique_ptr<Layer>> MakeReshape(std::string name,
                                                   const Shape& input,
                                                   const Shape& output);
absl::StatusOr<std::unique_ptr<Layer>> MakeDropout(std::string name,
                                                   const Shape& input,
                                                   float rate);

}  // namespace psflow

#endif  // PSFLOW_MODEL_LAYERS_LAYERS_H_
