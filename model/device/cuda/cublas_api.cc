#include "model/device/cuda/cublas_api.h"

#include <dlfcn.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psflow::cuda {
namespace {

absl::StatusOr<CublasApi> Load() {
  // The runtime's own search first (LD_LIBRARY_PATH, ld.so.cache), then
  // where CUDA toolkits install it.
  const std::vector<std::string> candidates = {
      "libcublas.so.13", "/usr/local/cuda/lib64/libcublas.so.13",
      "/usr/local/cuda-13/lib64/libcublas.so.13"};
  void* library = nullptr;
  std::vector<std::string> errors;
  for (const std::string& name : candidates) {
    library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) break;
    const char* error = dlerror();
    errors.push_back(error != nullptr ? error : name);
  }
  if (library == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "cuBLAS (libcublas.so.13) could not be loaded: ",
        absl::StrJoin(errors, "; "),
        "; install the CUDA 13 runtime libraries or use --device=cpu"));
  }
  CublasApi api;
  std::vector<std::string> missing;
  auto bind = [&](auto& fn, const char* symbol) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
        dlsym(library, symbol));
    if (fn == nullptr) missing.push_back(symbol);
  };
  bind(api.create, "cublasCreate_v2");
  bind(api.destroy, "cublasDestroy_v2");
  bind(api.set_stream, "cublasSetStream_v2");
  bind(api.get_stream, "cublasGetStream_v2");
  bind(api.set_math_mode, "cublasSetMathMode");
  bind(api.sgemm, "cublasSgemm_v2");
  bind(api.sgemm_strided_batched, "cublasSgemmStridedBatched");
  bind(api.sscal, "cublasSscal_v2");
  bind(api.get_status_string, "cublasGetStatusString");
  if (!missing.empty()) {
    return absl::UnavailableError(absl::StrCat("the loaded libcublas lacks ",
                                               absl::StrJoin(missing, ", "),
                                               "; it is not CUDA 13's cuBLAS"));
  }
  return api;  // The library stays loaded for the process's life.
}

}  // namespace

absl::StatusOr<const CublasApi*> Cublas() {
  static const absl::StatusOr<CublasApi>* const api =
      new absl::StatusOr<CublasApi>(Load());
  if (!api->ok()) return api->status();
  return &**api;
}

}  // namespace psflow::cuda
