#include "model/device/cpu/blas_kernels.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/ascii.h"
#include "common/logging.h"

extern "C" char* openblas_get_corename(void);

namespace psflow {
namespace {

constexpr char kRestartedMarker[] = "PSFLOW_BLAS_KERNELS_RESTARTED";

}  // namespace

std::string BlasKernels() {
  const char* name = openblas_get_corename();
  return name == nullptr ? "" : name;
}

CpuFeatures DetectCpuFeatures() {
  CpuFeatures cpu;
#if defined(__x86_64__)
  __builtin_cpu_init();
  cpu.avx2_fma =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  cpu.avx512 =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#endif
  return cpu;
}

std::optional<std::string> BetterBlasKernels(absl::string_view chosen,
                                             const CpuFeatures& cpu) {
  // OpenBLAS 0.3's kernels for AVX2+FMA CPUs and later; anything else on
  // such a CPU means it did not recognize the model.
  const std::string name = absl::AsciiStrToLower(chosen);
  for (const char* modern :
       {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"}) {
    if (name == modern) return std::nullopt;
  }
  if (name.empty()) return std::nullopt;  // not OpenBLAS's dynamic build
  if (cpu.avx512) return "SkylakeX";
  if (cpu.avx2_fma) return "Haswell";
  return std::nullopt;
}

void UseFastBlasKernels(char** argv) {
  const char* keep = std::getenv("PSFLOW_KEEP_BLAS_KERNELS");
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr ||
      std::getenv(kRestartedMarker) != nullptr ||
      (keep != nullptr && std::strcmp(keep, "1") == 0)) {
    return;
  }
  const std::string chosen = BlasKernels();
  const std::optional<std::string> better =
      BetterBlasKernels(chosen, DetectCpuFeatures());
  if (!better.has_value()) return;
  LOG(WARNING) << "OpenBLAS chose its " << chosen
               << " kernels, but this CPU has "
               << (*better == "SkylakeX" ? "AVX-512" : "AVX2 and FMA")
               << " (a virtual machine that hides its CPU model); starting "
                  "again with OPENBLAS_CORETYPE="
               << *better
               << " (2-4x faster matrix products; set OPENBLAS_CORETYPE "
                  "yourself to choose, or PSFLOW_KEEP_BLAS_KERNELS=1 to keep "
                  "these)";
  setenv("OPENBLAS_CORETYPE", better->c_str(), 1);
  setenv(kRestartedMarker, "1", 1);
  // The binary's own path, so the process keeps its name ("worker", not
  // "exe") for ps, top and pkill.
  char path[4096];
  const ssize_t length = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (length > 0) {
    path[length] = '\0';
    execv(path, argv);
  }
  // Still here: the restart failed; go on with the slow kernels.
  LOG(WARNING) << "could not start again (" << std::strerror(errno)
               << "); going on with the " << chosen << " kernels";
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv(kRestartedMarker);
}

}  // namespace psflow
