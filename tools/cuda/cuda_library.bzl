"""cuda_library: compiles .cu files with nvcc and wraps them as a cc_library.

Shaped like rules_cuda's macro of the same name so that moving to it later is
a load() change. Each .cu file becomes one position-independent object built
for Hopper (sm_90) with a compute_90 PTX fallback that newer GPUs JIT.

The .cu files may include their own `hdrs`, the CUDA headers and system
headers; keep project logic (absl::Status and the like) in plain C++ files
beside them, per STYLE.md. When CUDA is absent, or `--define=cuda=off`, the
targets are incompatible and `bazel build //...` skips them.
"""

load("@local_config_cuda//:defs.bzl", "CUDA_ENABLED", "NVCC")

CUDA_GENCODE_FLAGS = [
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
]

def cuda_target_compatible_with():
    """target_compatible_with value for anything that needs CUDA to build."""
    return select({
        "//tools/cuda:cuda_forced_off": ["//:incompatible"],
        "//conditions:default": [] if CUDA_ENABLED else ["//:incompatible"],
    })

def if_cuda(if_true, if_false = []):
    """select() value: if_true where CUDA targets build, if_false elsewhere.

    Lets a target that must build everywhere pick the CUDA implementation of
    something when there is one (e.g. //model/device:select_device links
    the CUDA backend or its no-CUDA stand-in), like TensorFlow's if_cuda.
    """
    return select({
        "//tools/cuda:cuda_forced_off": if_false,
        "//conditions:default": if_true if CUDA_ENABLED else if_false,
    })

def cuda_library(name, srcs, hdrs = [], deps = [], nvcc_flags = [], **kwargs):
    """A cc_library whose .cu sources are compiled by nvcc.

    Args:
      name: target name.
      srcs: .cu files (compiled by nvcc) and optionally .cc/.h files
        (compiled by the C++ toolchain as usual).
      hdrs: public headers; also visible to the .cu files.
      deps: cc_library dependencies of the C++ part.
      nvcc_flags: extra nvcc flags.
      **kwargs: passed to the cc_library (visibility, testonly, ...).
    """
    cu_srcs = [s for s in srcs if s.endswith(".cu")]
    other_srcs = [s for s in srcs if not s.endswith(".cu")]
    cu_hdrs = hdrs + [s for s in other_srcs if s.endswith((".h", ".cuh"))]
    objects = []
    for src in cu_srcs:
        obj = "_objs_cuda/%s/%s.o" % (name, src[:-len(".cu")])
        native.genrule(
            name = "%s_nvcc_%s" % (name, src.replace("/", "_").replace(".", "_")),
            srcs = [src] + cu_hdrs,
            outs = [obj],
            cmd = " ".join([
                NVCC if NVCC else "nvcc",
                "-c",
                "-std=c++17",
                "-O3",
                "-lineinfo",
                "-Xcompiler=-fPIC",
                "-I.",
                "-I$(GENDIR)",
            ] + CUDA_GENCODE_FLAGS + nvcc_flags + [
                "-o $@",
                "$(location %s)" % src,
            ]),
            target_compatible_with = cuda_target_compatible_with(),
            testonly = kwargs.get("testonly", False),
            visibility = ["//visibility:private"],
        )
        objects.append(obj)
    native.cc_library(
        name = name,
        srcs = objects + other_srcs,
        hdrs = hdrs,
        deps = deps + ["@local_config_cuda//:cuda"],
        # cudart is a static archive: the objects that call into it must be
        # linked into the binary itself, not a per-library shared object,
        # or the linker never pulls the runtime's symbols in.
        linkstatic = True,
        target_compatible_with = cuda_target_compatible_with(),
        **kwargs
    )
