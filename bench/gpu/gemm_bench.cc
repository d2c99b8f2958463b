// gemm_bench: psflow's Device::Gemm on the CUDA backend against cuBLAS
// called directly, in float32 and in TF32 tensor-core math.
//
// For each shape it times (wall clock around N back-to-back calls and one
// synchronization, after warm-up) our Gemm (row-major, through the Device
// interface, see model/device/cuda/row_major_gemm.h) and cuBLAS's own
// column-major call of the same m, n, k and transposes on the same memory.
// The peak of each math mode is the best cuBLAS rate over the square
// shapes; the target is our Gemm >= 0.8x that peak on the large MLP's
// shapes. TFLOP/s = 2 m n k / seconds / 1e12.
//
// The cuBLAS baseline is the one place outside model/device/cuda that
// calls cuBLAS; its status converts to absl::Status at once (cuda_status.h).
//
//   gemm_bench [--max_square=16384] [--min_seconds=0.3]
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "model/device/cuda/cuda_device.h"
#include "model/device/cuda/cuda_resources.h"
#include "model/device/cuda/cuda_status.h"

ABSL_FLAG(int, max_square, 16384, "largest square shape for the peak");
ABSL_FLAG(double, min_seconds, 0.3, "timed seconds per measurement");

namespace psflow::bench {
namespace {

struct Shape {
  std::string name;
  int64_t m, n, k;
  bool trans_a, trans_b;
};

// Seconds per call of `call`, then `sync`: warm-up, a probe for the count,
// then enough calls for --min_seconds.
absl::StatusOr<double> Time(const std::function<absl::Status()>& call,
                            const std::function<absl::Status()>& sync) {
  for (int i = 0; i < 3; ++i) RETURN_IF_ERROR(call());
  RETURN_IF_ERROR(sync());
  absl::Time start = absl::Now();
  RETURN_IF_ERROR(call());
  RETURN_IF_ERROR(sync());
  const double probe = absl::ToDoubleSeconds(absl::Now() - start);
  const int iters = static_cast<int>(std::clamp(
      absl::GetFlag(FLAGS_min_seconds) / std::max(probe, 1e-7), 5.0, 2000.0));
  start = absl::Now();
  for (int i = 0; i < iters; ++i) RETURN_IF_ERROR(call());
  RETURN_IF_ERROR(sync());
  return absl::ToDoubleSeconds(absl::Now() - start) / iters;
}

double Tflops(const Shape& s, double seconds) {
  return 2.0 * s.m * s.n * s.k / seconds / 1e12;
}

// A device (float32 or TF32 math) with three arrays of `elements` each,
// filled with values in [-1, 1].
struct Operands {
  std::unique_ptr<Device> device;
  std::shared_ptr<DeviceArray> a, b, c;
};

absl::StatusOr<Operands> MakeOperands(bool allow_tf32, int64_t elements,
                                      const std::vector<float>& fill) {
  CudaBackendOptions options;
  options.allow_tf32 = allow_tf32;
  Operands o;
  ASSIGN_OR_RETURN(o.device, cuda::CreateCudaDevice(options));
  for (auto* array : {&o.a, &o.b, &o.c}) {
    ASSIGN_OR_RETURN(*array, o.device->Allocate(elements));
    RETURN_IF_ERROR(o.device->Upload(fill, **array));
  }
  RETURN_IF_ERROR(o.device->Synchronize());
  return o;
}

absl::Status Run() {
  const int64_t square = absl::GetFlag(FLAGS_max_square);
  std::vector<Shape> shapes;
  for (int64_t s = 4096; s <= square; s *= 2) {
    shapes.push_back({absl::StrCat("square ", s), s, s, s, false, false});
  }
  const size_t peak_shapes = shapes.size();
  // The large MLP (784-4096-4096-10, batch 1024), hidden layer: forward
  // Z = A W, weight gradient dW = A^T dZ, input gradient dA = dZ W^T.
  shapes.push_back({"large MLP forward", 1024, 4096, 4096, false, false});
  shapes.push_back({"large MLP dW (A^T dZ)", 4096, 4096, 1024, true, false});
  shapes.push_back({"large MLP dA (dZ W^T)", 1024, 4096, 4096, false, true});
  // The default MLP (784-256-10, batch 64): latency-bound, for reference.
  shapes.push_back({"default MLP forward", 64, 256, 784, false, false});

  int64_t elements = 0;
  for (const Shape& s : shapes) {
    elements = std::max({elements, s.m * s.k, s.k * s.n, s.m * s.n});
  }
  std::vector<float> fill(elements);
  uint32_t state = 12345;
  for (float& x : fill) {
    state = state * 1664525u + 1013904223u;
    x = static_cast<float>(state >> 8) / 8388608.0f - 1.0f;
  }
  ASSIGN_OR_RETURN(Operands fp32, MakeOperands(false, elements, fill));
  ASSIGN_OR_RETURN(Operands tf32, MakeOperands(true, elements, fill));
  fill.clear();
  fill.shrink_to_fit();

  // cuBLAS directly, on its own stream, over the float32 device's memory.
  ASSIGN_OR_RETURN(cuda::Stream stream, cuda::CreateStream());
  ASSIGN_OR_RETURN(cuda::CublasHandle handle,
                   cuda::CreateCublasHandle(stream.get(), false));
  auto cublas = [&](const Shape& s, bool use_tf32) -> absl::Status {
    const float alpha = 1, beta = 0;
    // Column-major C[m x n] = op(A) op(B); leading dimensions of the
    // stored (column-major) matrices.
    const int lda = static_cast<int>(s.trans_a ? s.k : s.m);
    const int ldb = static_cast<int>(s.trans_b ? s.n : s.k);
    RETURN_IF_CUBLAS_ERROR(
        cublasGemmEx(
            handle.get(), s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
            s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(s.m),
            static_cast<int>(s.n), static_cast<int>(s.k), &alpha,
            fp32.a->data(), CUDA_R_32F, lda, fp32.b->data(), CUDA_R_32F, ldb,
            &beta, fp32.c->data(), CUDA_R_32F, static_cast<int>(s.m),
            use_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
            CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
    return absl::OkStatus();
  };
  auto cublas_sync = [&]() -> absl::Status {
    RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream.get()),
                         "cudaStreamSynchronize");
    return absl::OkStatus();
  };

  struct Row {
    double ours_fp32, cublas_fp32, ours_tf32, cublas_tf32;
  };
  std::vector<Row> rows;
  double peak_fp32 = 0, peak_tf32 = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape& s = shapes[i];
    Row row;
    for (bool use_tf32 : {false, true}) {
      Operands& o = use_tf32 ? tf32 : fp32;
      ASSIGN_OR_RETURN(double ours,
                       Time(
                           [&] {
                             return o.device->Gemm(s.trans_a, s.trans_b, s.m,
                                                   s.n, s.k, 1.0f, *o.a, *o.b,
                                                   0.0f, *o.c);
                           },
                           [&] { return o.device->Synchronize(); }));
      ASSIGN_OR_RETURN(double theirs,
                       Time([&] { return cublas(s, use_tf32); }, cublas_sync));
      (use_tf32 ? row.ours_tf32 : row.ours_fp32) = Tflops(s, ours);
      (use_tf32 ? row.cublas_tf32 : row.cublas_fp32) = Tflops(s, theirs);
    }
    if (i < peak_shapes) {
      peak_fp32 = std::max(peak_fp32, row.cublas_fp32);
      peak_tf32 = std::max(peak_tf32, row.cublas_tf32);
    }
    rows.push_back(row);
  }

  std::printf("## gemm_bench on %s\n\n", fp32.device->Describe().c_str());
  std::printf(
      "cuBLAS peak (best over the square shapes): float32 %.1f TFLOP/s, "
      "TF32 %.1f TFLOP/s\n\n",
      peak_fp32, peak_tf32);
  std::printf(
      "| shape | m x n x k | ours fp32 | cuBLAS fp32 | ours / peak fp32 | "
      "ours tf32 | cuBLAS tf32 | ours / peak tf32 |\n"
      "|---|---|---:|---:|---:|---:|---:|---:|\n");
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape& s = shapes[i];
    const Row& r = rows[i];
    std::printf(
        "| %s | %lldx%lldx%lld%s%s | %.1f | %.1f | %.2fx | %.1f | %.1f | "
        "%.2fx |\n",
        s.name.c_str(), static_cast<long long>(s.m),
        static_cast<long long>(s.n), static_cast<long long>(s.k),
        s.trans_a ? " A^T" : "", s.trans_b ? " B^T" : "", r.ours_fp32,
        r.cublas_fp32, r.ours_fp32 / peak_fp32, r.ours_tf32, r.cublas_tf32,
        r.ours_tf32 / peak_tf32);
    std::printf(
        "RESULT gemm_bench shape=\"%s\" ours_fp32=%.2f cublas_fp32=%.2f "
        "peak_fp32=%.2f ours_tf32=%.2f cublas_tf32=%.2f peak_tf32=%.2f\n",
        s.name.c_str(), r.ours_fp32, r.cublas_fp32, peak_fp32, r.ours_tf32,
        r.cublas_tf32, peak_tf32);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace psflow::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::Status status = psflow::bench::Run();
  if (!status.ok()) {
    std::fprintf(stderr, "gemm_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
