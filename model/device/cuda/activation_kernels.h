// Element-wise activation kernels: bias + activation forward (dense
// layers), a plain activation (convolutional layers, after batch norm) and
// the activation's backward. Plain C++ interface in front of the .cu file
// (no absl here, so nvcc compiles it alone); launchers enqueue on `stream`
// and return the launch error (cudaSuccess when queued). Pointers are
// device pointers; sizes are validated by the caller.
#ifndef PSFLOW_MODEL_DEVICE_CUDA_ACTIVATION_KERNELS_H_
#define PSFLOW_MODEL_DEVICE_CUDA_ACTIVATION_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace psflow::cuda {

// Mirrors psflow::Activation, which lives in a header nvcc does not see.
enum class KernelActivation : int { kNone, kRelu, kTanh, kSigmoid };

// In place on z[rows x cols] (row-major): z = act(z + bias[col]).
cudaError_t LaunchBiasActivation(int64_t rows, int64_t cols, const float* bias,
                                 KernelActivation act, float* z,
                                 cudaStream_t stream);

// y[n] = act(x[n]); y may be x.
cudaError_t LaunchActivate(int64_t n, KernelActivation act, const float* x,
                           float* y, cudaStream_t stream);

// In place on grad[n]: grad *= act'(.), act' written in terms of the
// activation's output out[n].
cudaError_t LaunchActivationBackward(int64_t n, KernelActivation act,
                                     const float* out, float* grad,
                                     cudaStream_t stream);

}  // namespace psflow::cuda

#endif  // PSFLOW_MODEL_DEVICE_CUDA_ACTIVATION_KERNELS_H_
