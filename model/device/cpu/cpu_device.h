// The CPU backend: OpenBLAS SGEMM (row-major, thread count fixed per
// process) and vectorized loops for the element-wise parts. Arrays are
// 64-byte-aligned host memory, so Upload/Download are plain copies.
#ifndef PSFLOW_MODEL_DEVICE_CPU_CPU_DEVICE_H_
#define PSFLOW_MODEL_DEVICE_CPU_CPU_DEVICE_H_

#include <memory>

#include "model/device/device.h"

namespace psflow {

// `threads` OpenBLAS threads (process-wide setting; 1 suits several
// workers per machine).
std::unique_ptr<Device> CreateCpuDevice(int threads);

}  // namespace psflow

#endif  // PSFLOW_MODEL_DEVICE_CPU_CPU_DEVICE_H_
