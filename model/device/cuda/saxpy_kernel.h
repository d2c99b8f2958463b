// y = a * x + y on the GPU: the smallest kernel that proves a device can
// load our code (right architecture or PTX JIT), read and write memory.
// Used by the device probe; plain C++ interface in front of the .cu file.
#ifndef PSFLOW_MODEL_DEVICE_CUDA_SAXPY_KERNEL_H_
#define PSFLOW_MODEL_DEVICE_CUDA_SAXPY_KERNEL_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace psflow::cuda {

// Enqueues the kernel on `stream` for device pointers `x` and `y` of `n`
// floats. Returns the launch error (cudaSuccess when enqueued).
cudaError_t LaunchSaxpy(float a, const float* x, float* y, int64_t n,
                        cudaStream_t stream);

}  // namespace psflow::cuda

#endif  // PSFLOW_MODEL_DEVICE_CUDA_SAXPY_KERNEL_H_
