// The CPU backend's layer ops (Device::Im2Col, Pool, BatchNorm*, ...) as
// plain loops over host memory, kept apart from cpu_device.cc so that each
// file has one job. Arguments are checked by the caller (device_checks.h);
// these functions trust them. Stateless; thread-safe.
#ifndef PSFLOW_MODEL_DEVICE_CPU_CPU_LAYER_OPS_H_
#define PSFLOW_MODEL_DEVICE_CPU_CPU_LAYER_OPS_H_

#include <cstdint>

#include "model/device/device.h"

namespace psflow::cpu {

void Activate(int64_t n, Activation activation, const float* x, float* y);
void Im2Col(const WindowGeometry& g, const float* x, float* cols);
void Col2Im(const WindowGeometry& g, const float* cols, float* x);
void Pool(PoolKind kind, const WindowGeometry& g, const float* x, float* y);
void PoolBackward(PoolKind kind, const WindowGeometry& g, const float* x,
                  const float* y, const float* dy, float* dx);
void ChannelMoments(int64_t rows, int64_t channels, const float* x, float* mean,
                    float* var);
// gamma and beta may be null (1 and 0).
void BatchNormApply(int64_t rows, int64_t channels, const float* x,
                    const float* mean, const float* var, float epsilon,
                    const float* gamma, const float* beta, float* y);
// gamma, dgamma and dbeta may be null; dx may equal dy.
void BatchNormBackward(int64_t rows, int64_t channels, const float* x,
                       const float* mean, const float* var, float epsilon,
                       const float* gamma, const float* dy, float* dx,
                       float* dgamma, float* dbeta);

}  // namespace psflow::cpu

#endif  // PSFLOW_MODEL_DEVICE_CPU_CPU_LAYER_OPS_H_
