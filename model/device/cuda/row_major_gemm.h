// Row-major SGEMM on cuBLAS, which is column-major.
//
// A row-major matrix X[r x c] occupies memory exactly as the column-major
// matrix X^T[c x r] with leading dimension c. So for row-major
//   C[m x n] = alpha * op(A)[m x k] * op(B)[k x n] + beta * C
// we ask cuBLAS for the column-major product
//   C^T[n x m] = alpha * op(B)^T * op(A)^T + beta * C^T,
// i.e. swap the operands (B first), keep each one's transpose flag, swap
// m and n, and pass the row-major leading dimensions unchanged: A's is k
// (m when trans_a), B's is n (k when trans_b), C's is n. No data moves;
// this is the only place that knows about it.
#ifndef PSFLOW_MODEL_DEVICE_CUDA_ROW_MAJOR_GEMM_H_
#define PSFLOW_MODEL_DEVICE_CUDA_ROW_MAJOR_GEMM_H_

#include <cublas_v2.h>

#include <cstdint>

#include "absl/status/status.h"

namespace psflow::cuda {

// Enqueues C = alpha * op(A) * op(B) + beta * C on the handle's stream for
// row-major device matrices, with the Device::Gemm conventions (A stored
// k x m when trans_a, B stored n x k when trans_b). beta == 0 ignores what
// C held (NaN included). k == 0 scales C by beta (without cuBLAS's GEMM).
// InvalidArgument when a dimension exceeds cuBLAS's 32-bit int range; cuBLAS
// errors as Status.
absl::Status RowMajorSgemm(cublasHandle_t handle, bool trans_a, bool trans_b,
                           int64_t m, int64_t n, int64_t k, float alpha,
                           const float* a, const float* b, float beta,
                           float* c);

// `batch` row-major products as RowMajorSgemm's, the i-th on A + i *
// stride_a, B + i * stride_b and C + i * stride_c (cuBLAS's strided
// batched GEMM, with the same operand swap).
absl::Status RowMajorSgemmStridedBatched(cublasHandle_t handle, bool trans_a,
                                         bool trans_b, int64_t m, int64_t n,
                                         int64_t k, float alpha, const float* a,
                                         int64_t stride_a, const float* b,
                                         int64_t stride_b, float beta, float* c,
                                         int64_t stride_c, int64_t batch);

}  // namespace psflow::cuda

#endif  // PSFLOW_MODEL_DEVICE_CUDA_ROW_MAJOR_GEMM_H_
