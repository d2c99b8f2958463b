// The CPU backend: OpenBLAS SGEMM (row-major) and vectorized loops for the
// element-wise parts, every op split over the device's own compute threads
// (cpu_thread_pool.h): GEMMs by bands of rows or columns of the product,
// window ops by image, channel ops by rows. Results are the same on every
// run with the same thread count, and within float rounding across thread
// counts. Arrays are 64-byte-aligned host memory, so Upload/Download are
// plain copies.
#ifndef PSFLOW_MODEL_DEVICE_CPU_CPU_DEVICE_H_
#define PSFLOW_MODEL_DEVICE_CPU_CPU_DEVICE_H_

#include <memory>

#include "model/device/device.h"

namespace psflow {

// A device computing on `threads` threads: the caller's and threads - 1
// helpers it owns (1 suits several workers per machine). OpenBLAS is set to
// one thread process-wide, since the device splits its products itself.
// Describe() still says "OpenBLAS N threads", as logs and docs quote it.
std::unique_ptr<Device> CreateCpuDevice(int threads);

}  // namespace psflow

#endif  // PSFLOW_MODEL_DEVICE_CPU_CPU_DEVICE_H_
