// OpenBLAS picks its kernels for the CPU model it recognizes when the
// library loads. A virtual machine that hides the model (as some cloud and
// GPU hosts do) leaves it on its generic "Prescott" kernels even on a CPU
// with AVX2 or AVX-512: matrix products then run 2-4x slower (measured in
// bench/RESULTS.md, issue 18: the CTR job's MLP step, 42k against 186k
// examples/s on one core of an AVX-512 Xeon VM). The choice can only be
// made before the library loads (OPENBLAS_CORETYPE), so a role binary that
// finds the generic kernels on a capable CPU starts itself again with the
// right ones, first thing in main(), before any thread or socket exists.
//
// An OPENBLAS_CORETYPE the user set is always kept.
#ifndef PSFLOW_MODEL_DEVICE_CPU_BLAS_KERNELS_H_
#define PSFLOW_MODEL_DEVICE_CPU_BLAS_KERNELS_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace psflow {

// The kernels OpenBLAS chose ("Haswell", "SkylakeX", "Prescott", ...).
std::string BlasKernels();

struct CpuFeatures {
  bool avx2_fma = false;  // AVX2 and FMA3
  bool avx512 = false;    // AVX-512 F, BW, DQ and VL
};
CpuFeatures DetectCpuFeatures();

// The kernels to ask for instead of `chosen`, or nullopt when `chosen` is
// already fit for this CPU: only OpenBLAS's older or generic kernels on a
// CPU with AVX2+FMA (Haswell's) or AVX-512 (SkylakeX's) are replaced.
std::optional<std::string> BetterBlasKernels(absl::string_view chosen,
                                             const CpuFeatures& cpu);

// Called first thing in main(): when OpenBLAS chose generic kernels on a
// capable CPU and neither OPENBLAS_CORETYPE nor an earlier restart is in
// the environment, logs it and executes this binary again with
// OPENBLAS_CORETYPE set (it returns only if that fails, logged). Set
// PSFLOW_KEEP_BLAS_KERNELS=1 to never restart.
void UseFastBlasKernels(char** argv);

}  // namespace psflow

#endif  // PSFLOW_MODEL_DEVICE_CPU_BLAS_KERNELS_H_
