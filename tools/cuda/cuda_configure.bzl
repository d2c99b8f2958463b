"""Detects the CUDA toolkit and generates @local_config_cuda.

The generated repository always has the same shape so that BUILD files never
branch on it by hand:

  @local_config_cuda//:defs.bzl   CUDA_ENABLED, CUDA_PATH, NVCC
  @local_config_cuda//:cuda       headers + cudart (static) + cuBLAS link flags

Without a toolkit, CUDA_ENABLED is False and `:cuda` is an empty library;
cuda_library() then marks its targets incompatible so `bazel build //...`
skips them instead of failing.

The toolkit is looked up in $CUDA_PATH, then /usr/local/cuda. Setting
PSFLOW_CUDA=0 forces a CPU-only configuration on a machine that has one.
"""

def _find_cuda(repository_ctx):
    if repository_ctx.os.environ.get("PSFLOW_CUDA", "") == "0":
        return None
    candidates = []
    env_path = repository_ctx.os.environ.get("CUDA_PATH", "")
    if env_path:
        candidates.append(env_path)
    candidates.append("/usr/local/cuda")
    for path in candidates:
        nvcc = repository_ctx.path(path + "/bin/nvcc")
        header = repository_ctx.path(path + "/include/cuda_runtime.h")
        if nvcc.exists and header.exists:
            return str(repository_ctx.path(path).realpath)
    return None

_ENABLED_BUILD = """
package(default_visibility = ["//visibility:public"])

exports_files(["defs.bzl"])

cc_library(
    name = "cuda",
    hdrs = glob(["include/**"]),
    includes = ["include"],
    linkopts = [
        "-L{path}/lib64",
        # cuBLAS is not linked: model/device/cuda/cublas_api loads it at
        # run time, so binaries start where it is missing. The CUDA runtime
        # is static and loads the driver (libcuda) itself when used.
        "-l:libcudart_static.a",
        "-ldl",
        "-lrt",
        "-lpthread",
    ],
)
"""

_CUBLAS_LINK = """
# Linked cuBLAS, for benchmarks that call it directly as their baseline.
cc_library(
    name = "cublas_linked",
    linkopts = [
        "-L{path}/lib64",
        "-Wl,-rpath,{path}/lib64",
        "-Wl,-rpath,/usr/local/cuda/lib64",
        "-lcublas",
        "-lcublasLt",
    ],
    deps = [":cuda"],
)
"""

_DISABLED_BUILD = """
package(default_visibility = ["//visibility:public"])

exports_files(["defs.bzl"])

# No CUDA toolkit was found: an empty library so that dependencies resolve.
# Targets that need CUDA are incompatible in this configuration.
cc_library(name = "cuda")

cc_library(name = "cublas_linked")
"""

def _cuda_configure_impl(repository_ctx):
    path = _find_cuda(repository_ctx)
    if path:
        repository_ctx.symlink(path + "/include", "include")
        repository_ctx.file(
            "BUILD",
            _ENABLED_BUILD.format(path = path) + _CUBLAS_LINK.format(path = path),
        )
        repository_ctx.file("defs.bzl", "\n".join([
            "CUDA_ENABLED = True",
            "CUDA_PATH = \"%s\"" % path,
            "NVCC = \"%s/bin/nvcc\"" % path,
            "",
        ]))
    else:
        repository_ctx.file("BUILD", _DISABLED_BUILD)
        repository_ctx.file("defs.bzl", "\n".join([
            "CUDA_ENABLED = False",
            "CUDA_PATH = \"\"",
            "NVCC = \"\"",
            "",
        ]))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH", "PSFLOW_CUDA"],
    local = True,
)
