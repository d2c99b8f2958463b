#include <algorithm>

#include "model/device/cuda/activation_kernels.h"

namespace psflow::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;

// Written like the CPU backend so NaN propagates the same way (relu of NaN
// is NaN) and results agree to a few ulp (precise expf/tanhf; the build
// does not use fast math).
template <KernelActivation kAct>
__device__ __forceinline__ float Apply(float x) {
  if constexpr (kAct == KernelActivation::kRelu) {
    return x < 0.0f ? 0.0f : x;
  } else if constexpr (kAct == KernelActivation::kTanh) {
    return tanhf(x);
  } else if constexpr (kAct == KernelActivation::kSigmoid) {
    return 1.0f / (1.0f + expf(-x));
  } else {
    return x;
  }
}

// Derivative in terms of the output a = act(x).
template <KernelActivation kAct>
__device__ __forceinline__ float Derivative(float a) {
  if constexpr (kAct == KernelActivation::kRelu) {
    return a > 0.0f ? 1.0f : 0.0f;
  } else if constexpr (kAct == KernelActivation::kTanh) {
    return 1.0f - a * a;
  } else if constexpr (kAct == KernelActivation::kSigmoid) {
    return a * (1.0f - a);
  } else {
    return 1.0f;
  }
}

// blockIdx.x covers columns (coalesced), blockIdx.y strides over rows, so
// no thread divides by `cols`.
template <KernelActivation kAct>
__global__ void BiasActivationKernel(int64_t rows, int64_t cols,
                                     const float* __restrict__ bias,
                                     float* __restrict__ z) {
  const int64_t col = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  if (col >= cols) return;
  const float b = bias[col];
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    float* p = z + row * cols + col;
    *p = Apply<kAct>(*p + b);
  }
}

// y may be x: no __restrict__, and each element is read before it is
// written by the same thread.
template <KernelActivation kAct>
__global__ void ActivateKernel(int64_t n, const float* x, float* y) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * kThreads) {
    y[i] = Apply<kAct>(x[i]);
  }
}

template <KernelActivation kAct>
__global__ void ActivationBackwardKernel(int64_t n,
                                         const float* __restrict__ out,
                                         float* __restrict__ grad) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * kThreads) {
    if constexpr (kAct == KernelActivation::kRelu) {
      grad[i] = out[i] > 0.0f ? grad[i] : 0.0f;  // keeps NaN out of 0 * NaN
    } else {
      grad[i] *= Derivative<kAct>(out[i]);
    }
  }
}

template <KernelActivation kAct>
void LaunchBias(int64_t rows, int64_t cols, const float* bias, float* z,
                cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((cols + kThreads - 1) / kThreads),
                  static_cast<unsigned>(std::min(rows, kMaxBlocks)));
  BiasActivationKernel<kAct>
      <<<grid, kThreads, 0, stream>>>(rows, cols, bias, z);
}

template <KernelActivation kAct>
void LaunchElementwise(int64_t n, const float* x, float* y,
                       cudaStream_t stream) {
  const int64_t blocks =
      std::min((n + kThreads - 1) / kThreads, 4 * kMaxBlocks);
  ActivateKernel<kAct>
      <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(n, x, y);
}

template <KernelActivation kAct>
void LaunchBackward(int64_t n, const float* out, float* grad,
                    cudaStream_t stream) {
  const int64_t blocks =
      std::min((n + kThreads - 1) / kThreads, 4 * kMaxBlocks);
  ActivationBackwardKernel<kAct>
      <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(n, out, grad);
}

}  // namespace

cudaError_t LaunchBiasActivation(int64_t rows, int64_t cols, const float* bias,
                                 KernelActivation act, float* z,
                                 cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  switch (act) {
    case KernelActivation::kNone:
      LaunchBias<KernelActivation::kNone>(rows, cols, bias, z, stream);
      break;
    case KernelActivation::kRelu:
      LaunchBias<KernelActivation::kRelu>(rows, cols, bias, z, stream);
      break;
    case KernelActivation::kTanh:
      LaunchBias<KernelActivation::kTanh>(rows, cols, bias, z, stream);
      break;
    case KernelActivation::kSigmoid:
      LaunchBias<KernelActivation::kSigmoid>(rows, cols, bias, z, stream);
      break;
  }
  return cudaGetLastError();
}

cudaError_t LaunchActivate(int64_t n, KernelActivation act, const float* x,
                           float* y, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  switch (act) {
    case KernelActivation::kNone:
      if (x == y) return cudaSuccess;  // identity in place: nothing to do
      LaunchElementwise<KernelActivation::kNone>(n, x, y, stream);
      break;
    case KernelActivation::kRelu:
      LaunchElementwise<KernelActivation::kRelu>(n, x, y, stream);
      break;
    case KernelActivation::kTanh:
      LaunchElementwise<KernelActivation::kTanh>(n, x, y, stream);
      break;
    case KernelActivation::kSigmoid:
      LaunchElementwise<KernelActivation::kSigmoid>(n, x, y, stream);
      break;
  }
  return cudaGetLastError();
}

cudaError_t LaunchActivationBackward(int64_t n, KernelActivation act,
                                     const float* out, float* grad,
                                     cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  switch (act) {
    case KernelActivation::kNone:
      return cudaSuccess;  // identity: the gradient passes through
    case KernelActivation::kRelu:
      LaunchBackward<KernelActivation::kRelu>(n, out, grad, stream);
      break;
    case KernelActivation::kTanh:
      LaunchBackward<KernelActivation::kTanh>(n, out, grad, stream);
      break;
    case KernelActivation::kSigmoid:
      LaunchBackward<KernelActivation::kSigmoid>(n, out, grad, stream);
      break;
  }
  return cudaGetLastError();
}

}  // namespace psflow::cuda
