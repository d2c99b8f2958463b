#!/usr/bin/env python3
"""ONNX's own checker (Debian's python3-onnx 1.12) on a psflow export.

Usage: check_onnx.py <model.onnx>

Runs onnx.checker.check_model with full_check (the operators' schemas and
shape inference too), then prints one line per graph input and output
("input pixels float32 [batch, 28, 28]") and "check_onnx: OK"; prints the
checker's complaint and exits 1 otherwise.
"""
import sys

import onnx


def type_of(value):
    tensor = value.type.tensor_type
    dims = [d.dim_param or str(d.dim_value) for d in tensor.shape.dim]
    name = onnx.TensorProto.DataType.Name(tensor.elem_type).lower()
    return "%s [%s]" % (name, ", ".join(dims))


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    model = onnx.load(argv[1])
    try:
        onnx.checker.check_model(model, full_check=True)
    except onnx.checker.ValidationError as e:
        print("check_onnx: %s fails the checker: %s" % (argv[1], e))
        sys.exit(1)
    for value in model.graph.input:
        print("input %s %s" % (value.name, type_of(value)))
    for value in model.graph.output:
        print("output %s %s" % (value.name, type_of(value)))
    print("check_onnx: OK, opsets %s, %d nodes, %d initializers" % (
        ", ".join("%s %d" % (o.domain or "ai.onnx", o.version)
                  for o in model.opset_import),
        len(model.graph.node), len(model.graph.initializer)))


if __name__ == "__main__":
    main(sys.argv)
