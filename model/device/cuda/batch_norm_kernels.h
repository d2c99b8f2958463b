// Batch normalization's kernels over x[rows x channels] (NHWC activations
// seen as a matrix, channels innermost): per-channel moments, the
// normalization and its training-mode backward. Plain C++ interface in
// front of the .cu file; see activation_kernels.h for the conventions.
//
// The reductions are deterministic (fixed-order trees, no atomics): a
// first kernel reduces tiles of rows per block into `scratch`, a second
// combines the tiles per channel in order.
#ifndef PSFLOW_MODEL_DEVICE_CUDA_BATCH_NORM_KERNELS_H_
#define PSFLOW_MODEL_DEVICE_CUDA_BATCH_NORM_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace psflow::cuda {

// Floats of scratch that LaunchChannelMoments and LaunchBatchNormBackward
// need for `rows` x `channels`: two per channel per tile of rows (at most
// 512 tiles) and four per channel.
int64_t BatchNormScratchFloats(int64_t rows, int64_t channels);

// mean[c] and the biased variance var[c] of each column of x; zeros when
// rows == 0. Welford within each thread, merged with Chan et al.'s
// pairwise formula (in double across row tiles): no cancellation of
// E[x^2] - E[x]^2.
cudaError_t LaunchChannelMoments(int64_t rows, int64_t channels, const float* x,
                                 float* mean, float* var, float* scratch,
                                 cudaStream_t stream);

// y = gamma * (x - mean) / sqrt(var + epsilon) + beta per channel; gamma
// and beta may be null (1 and 0); y may be x.
cudaError_t LaunchBatchNormApply(int64_t rows, int64_t channels, const float* x,
                                 const float* mean, const float* var,
                                 float epsilon, const float* gamma,
                                 const float* beta, float* y,
                                 cudaStream_t stream);

// With x_hat = (x - mean) / sqrt(var + epsilon) and N = rows: dx = gamma /
// sqrt(var + epsilon) * (dy - sum(dy) / N - x_hat * sum(dy * x_hat) / N);
// dgamma = sum(dy * x_hat) and dbeta = sum(dy) per channel when non-null.
// dx may be dy (the sums are complete before dx is written); gamma may be
// null (1).
cudaError_t LaunchBatchNormBackward(int64_t rows, int64_t channels,
                                    const float* x, const float* mean,
                                    const float* var, float epsilon,
                                    const float* gamma, const float* dy,
                                    float* dx, float* dgamma, float* dbeta,
                                    float* scratch, cudaStream_t stream);

}  // namespace psflow::cuda

#endif  // PSFLOW_MODEL_DEVICE_CUDA_BATCH_NORM_KERNELS_H_
