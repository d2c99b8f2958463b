#include "model/device/cuda/row_major_gemm.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/device/cuda/cublas_api.h"
#include "model/device/cuda/cuda_status.h"

namespace psflow::cuda {

absl::Status RowMajorSgemm(cublasHandle_t handle, bool trans_a, bool trans_b,
                           int64_t m, int64_t n, int64_t k, float alpha,
                           const float* a, const float* b, float beta,
                           float* c) {
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (m > kMax || n > kMax || k > kMax) {
    return absl::InvalidArgumentError(
        absl::StrCat("gemm ", m, "x", n, "x", k,
                     ": dimensions above 2^31 - 1 are not supported"));
  }
  if (m == 0 || n == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(const CublasApi* api, Cublas());
  if (k == 0) {
    // C = beta * C, with BLAS's rule that beta == 0 ignores C (NaN
    // included). Done here rather than trusting every cuBLAS version's
    // k == 0 path.
    cudaStream_t stream = nullptr;
    RETURN_IF_CUBLAS_ERROR(api->get_stream(handle, &stream), "cublasGetStream");
    if (beta == 0.0f) {
      RETURN_IF_CUDA_ERROR(cudaMemsetAsync(c, 0, m * n * sizeof(float), stream),
                           "cudaMemsetAsync (gemm with k = 0)");
      return absl::OkStatus();
    }
    if (m * n > kMax) {
      return absl::InvalidArgumentError(
          absl::StrCat("gemm ", m, "x", n, "x0: C above 2^31 - 1 elements"));
    }
    RETURN_IF_CUBLAS_ERROR(
        api->sscal(handle, static_cast<int>(m * n), &beta, c, 1),
        "cublasSscal (gemm with k = 0)");
    return absl::OkStatus();
  }
  const int lda = static_cast<int>(std::max<int64_t>(1, trans_a ? m : k));
  const int ldb = static_cast<int>(std::max<int64_t>(1, trans_b ? k : n));
  const int ldc = static_cast<int>(n);
  RETURN_IF_CUBLAS_ERROR(
      api->sgemm(handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                 trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
                 static_cast<int>(m), static_cast<int>(k), &alpha, b, ldb, a,
                 lda, &beta, c, ldc),
      "cublasSgemm");
  return absl::OkStatus();
}

absl::Status RowMajorSgemmStridedBatched(cublasHandle_t handle, bool trans_a,
                                         bool trans_b, int64_t m, int64_t n,
                                         int64_t k, float alpha, const float* a,
                                         int64_t stride_a, const float* b,
                                         int64_t stride_b, float beta, float* c,
                                         int64_t stride_c, int64_t batch) {
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (m > kMax || n > kMax || k > kMax || batch > kMax) {
    return absl::InvalidArgumentError(
        absl::StrCat("batched gemm ", batch, " x ", m, "x", n, "x", k,
                     ": dimensions above 2^31 - 1 are not supported"));
  }
  if (m == 0 || n == 0 || batch == 0) return absl::OkStatus();
  if (k == 0 || batch == 1) {
    for (int64_t i = 0; i < batch; ++i) {
      RETURN_IF_ERROR(RowMajorSgemm(handle, trans_a, trans_b, m, n, k, alpha,
                                    a + i * stride_a, b + i * stride_b, beta,
                                    c + i * stride_c));
    }
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const CublasApi* api, Cublas());
  const int lda = static_cast<int>(std::max<int64_t>(1, trans_a ? m : k));
  const int ldb = static_cast<int>(std::max<int64_t>(1, trans_b ? k : n));
  const int ldc = static_cast<int>(n);
  RETURN_IF_CUBLAS_ERROR(
      api->sgemm_strided_batched(
          handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
          trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
          static_cast<int>(m), static_cast<int>(k), &alpha, b, ldb, stride_b, a,
          lda, stride_a, &beta, c, ldc, stride_c, static_cast<int>(batch)),
      "cublasSgemmStridedBatched");
  return absl::OkStatus();
}

}  // namespace psflow::cuda
