// The CPU backend's layer ops (Device::Im2Col, Pool, BatchNorm*, ...) as
// plain loops over host memory, kept apart from cpu_device.cc so that each
// file has one job. Arguments are checked by the caller (device_checks.h);
// these functions trust them. Each splits its work over `pool`'s threads
// by image (window ops) or by rows (channel ops); sums over rows are
// combined from per-chunk partials in chunk order, so results are the same
// on every run with the same thread count, and within float rounding of
// the one-thread results. Stateless; thread-safe.
#ifndef PSFLOW_MODEL_DEVICE_CPU_CPU_LAYER_OPS_H_
#define PSFLOW_MODEL_DEVICE_CPU_CPU_LAYER_OPS_H_

#include <cstdint>

#include "model/device/cpu/cpu_thread_pool.h"
#include "model/device/device.h"

namespace psflow::cpu {

void Activate(CpuThreadPool& pool, int64_t n, Activation activation,
              const float* x, float* y);
void Im2Col(CpuThreadPool& pool, const WindowGeometry& g, const float* x,
            float* cols);
// Im2Col's rows of images [first, last) only, on the calling thread.
void Im2ColImages(const WindowGeometry& g, const float* x, float* cols,
                  int64_t first, int64_t last);
// Col2Im's images [first, last) only (overwritten), on the calling thread.
void Col2ImImages(const WindowGeometry& g, const float* cols, float* x,
                  int64_t first, int64_t last);
void Col2Im(CpuThreadPool& pool, const WindowGeometry& g, const float* cols,
            float* x);
void Pool(CpuThreadPool& pool, PoolKind kind, const WindowGeometry& g,
          const float* x, float* y);
void PoolBackward(CpuThreadPool& pool, PoolKind kind, const WindowGeometry& g,
                  const float* x, const float* y, const float* dy, float* dx);
void ChannelMoments(CpuThreadPool& pool, int64_t rows, int64_t channels,
                    const float* x, float* mean, float* var);
// gamma and beta may be null (1 and 0).
void BatchNormApply(CpuThreadPool& pool, int64_t rows, int64_t channels,
                    const float* x, const float* mean, const float* var,
                    float epsilon, const float* gamma, const float* beta,
                    float* y);
// gamma, dgamma and dbeta may be null; dx may equal dy.
void BatchNormBackward(CpuThreadPool& pool, int64_t rows, int64_t channels,
                       const float* x, const float* mean, const float* var,
                       float epsilon, const float* gamma, const float* dy,
                       float* dx, float* dgamma, float* dbeta);

}  // namespace psflow::cpu

#endif  // PSFLOW_MODEL_DEVICE_CPU_CPU_LAYER_OPS_H_
