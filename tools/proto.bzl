"""cc_grpc_proto_library: C++ (and gRPC) code generation with system protoc.

There are no rules_proto offline, so a genrule runs Debian's protoc and
grpc_cpp_plugin. Named after the upstream rule so that migrating to
rules_proto/grpc is a load() change.

Protos import each other by workspace path (`import "proto/tensor.proto";`).
Each macro also defines `<name>_protos`, a filegroup of its .proto files and
those of its deps, so that protoc sees every imported file.
"""

_PROTOC = "/usr/bin/protoc"
_GRPC_PLUGIN = "/usr/bin/grpc_cpp_plugin"

def cc_grpc_proto_library(name, srcs, deps = [], grpc = True, **kwargs):
    """Generates and compiles C++ code for `srcs`.

    Args:
      name: the cc_library target.
      srcs: .proto files of this package.
      deps: other cc_grpc_proto_library targets whose protos are imported.
      grpc: also generate gRPC service stubs (*.grpc.pb.*).
      **kwargs: passed to the cc_library (visibility, ...).
    """
    native.filegroup(
        name = name + "_protos",
        srcs = srcs + [d + "_protos" for d in deps],
        visibility = kwargs.get("visibility"),
    )
    outs = []
    for src in srcs:
        base = src[:-len(".proto")]
        outs += [base + ".pb.h", base + ".pb.cc"]
        if grpc:
            outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
    cmd = "%s -I. --cpp_out=$(GENDIR)" % _PROTOC
    if grpc:
        cmd += " --grpc_out=$(GENDIR) --plugin=protoc-gen-grpc=%s" % _GRPC_PLUGIN
    cmd += " " + " ".join(["$(location %s)" % s for s in srcs])
    native.genrule(
        name = name + "_codegen",
        srcs = srcs + [name + "_protos"],
        outs = outs,
        cmd = cmd,
        visibility = ["//visibility:private"],
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps + ["//third_party:protobuf"] + (["//third_party:grpc++"] if grpc else []),
        **kwargs
    )
