// Column sums of a row-major matrix (the bias gradient of a dense layer).
// Plain C++ interface in front of the .cu file; see activation_kernels.h
// for the conventions.
#ifndef PSFLOW_MODEL_DEVICE_CUDA_REDUCTION_KERNELS_H_
#define PSFLOW_MODEL_DEVICE_CUDA_REDUCTION_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace psflow::cuda {

// sums[cols] = sum over rows of x[rows x cols]; zeros when rows == 0.
// Deterministic: the same inputs give the same bits on every run.
cudaError_t LaunchColumnSums(int64_t rows, int64_t cols, const float* x,
                             float* sums, cudaStream_t stream);

}  // namespace psflow::cuda

#endif  // PSFLOW_MODEL_DEVICE_CUDA_REDUCTION_KERNELS_H_
