"""cc_headers: the headers of cc_library targets, as plain files.

cuda_library (tools/cuda/cuda_library.bzl) gives nvcc only the headers named
in its own `hdrs`/`srcs`, not those of its `deps`. A .cu file that includes
a header of another package (model/device/dropout_hash.h: host and device
code shared with the CPU backend) puts a cc_headers target of that
package's cc_library in its `hdrs`, and the library itself in its `deps`.
The library's visibility applies; a bare file label would need
exports_files() in the other package.
"""

def _cc_headers_impl(ctx):
    return [DefaultInfo(files = depset(transitive = [
        depset(dep[CcInfo].compilation_context.direct_public_headers)
        for dep in ctx.attr.deps
    ]))]

cc_headers = rule(
    implementation = _cc_headers_impl,
    attrs = {"deps": attr.label_list(providers = [CcInfo])},
    doc = "The public headers declared by `deps` (not their deps').",
)
