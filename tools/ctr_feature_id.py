#!/usr/bin/env python3
"""Criteo text to the inputs of psflow's exported click-through-rate models.

psflow's reader turns categorical values into ids with a hash that ONNX
opset 13 cannot express, so an exported model (`psctl ckpt export
--format=onnx`, docs/models.md "ONNX export") takes the ids already hashed.
This is that hash and the reader's column rules, in standard-library
Python, exactly as data/ctr_examples.h (CtrFeatureId) and
data/criteo_parser.cc define them:

    id = (field << 48) | (SplitMix64Mix(value) & (2**48 - 1))

where `value` is the 64-bit number a categorical column's 1 to 16 hex
digits spell, `field` is 0-based (C1 is field 0) and SplitMix64Mix is
SplitMix64's finalizer.

As a module:
    ctr_feature_id(field, value) -> int
    criteo_inputs(lines, num_dense=13, num_fields=26) -> (dense, ids)
        dense: [batch][num_dense] raw integers (a missing value is 0), what
               the model's int64 "dense" input takes (it applies
               log(1 + max(x, 0)) itself);
        ids:   [batch][num_fields][bag] ids padded with -1 (bag: the
               longest bag, at least 1), the model's "ids" input.

As a command, Criteo lines on stdin to JSON on stdout:
    ctr_feature_id.py [--num_dense=13] [--num_fields=26] [--dense_name=dense]
prints {"inputs": [{"name", "type": "int64", "dims", "data"}, ...]} with the
int64 values as strings (JSON numbers are doubles to JavaScript).
"""
import json
import sys

_MASK64 = (1 << 64) - 1
_VALUE_BITS = 48


def splitmix64_mix(z):
    """SplitMix64's finalizer (common/splitmix64.h), modulo 2**64."""
    z &= _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def ctr_feature_id(field, value):
    """The id psflow's reader gives categorical `value` of `field`."""
    if not 0 <= field < (1 << 15):
        raise ValueError("field %d is outside 0..32767" % field)
    return (field << _VALUE_BITS) | (splitmix64_mix(value) & ((1 << _VALUE_BITS) - 1))


def parse_criteo_line(line, num_dense=13, num_fields=26):
    """(label, dense integers, one list of ids per field) of one line."""
    columns = line.rstrip("\r\n").split("\t")
    if len(columns) != 1 + num_dense + num_fields:
        raise ValueError("%d columns; expected 1 + %d + %d" %
                         (len(columns), num_dense, num_fields))
    label = int(columns[0])
    dense = [int(c) if c else 0 for c in columns[1:1 + num_dense]]
    bags = []
    for f, c in enumerate(columns[1 + num_dense:]):
        if c and len(c) > 16:
            raise ValueError("%r has more than 16 hex digits" % c)
        bags.append([ctr_feature_id(f, int(c, 16))] if c else [])
    return label, dense, bags


def criteo_inputs(lines, num_dense=13, num_fields=26):
    """The model's dense and ids inputs (nested lists) for `lines`."""
    dense, bags = [], []
    for line in lines:
        if not line.strip():
            continue
        _, d, b = parse_criteo_line(line, num_dense, num_fields)
        dense.append(d)
        bags.append(b)
    longest = max([1] + [len(bag) for row in bags for bag in row])
    ids = [[bag + [-1] * (longest - len(bag)) for bag in row] for row in bags]
    return dense, ids


def _flat(nested):
    if isinstance(nested, list):
        return [x for item in nested for x in _flat(item)]
    return [str(nested)]


def main(argv):
    options = {"num_dense": "13", "num_fields": "26", "dense_name": "dense"}
    for arg in argv[1:]:
        key, _, value = arg.lstrip("-").partition("=")
        if key not in options or not value:
            sys.exit(__doc__)
        options[key] = value
    num_dense, num_fields = int(options["num_dense"]), int(options["num_fields"])
    dense, ids = criteo_inputs(sys.stdin, num_dense, num_fields)
    bag = len(ids[0][0]) if ids and ids[0] else 1
    inputs = []
    if num_dense > 0:
        inputs.append({"name": options["dense_name"], "type": "int64",
                       "dims": [len(dense), num_dense], "data": _flat(dense)})
    inputs.append({"name": "ids", "type": "int64",
                   "dims": [len(ids), num_fields, bag], "data": _flat(ids)})
    json.dump({"inputs": inputs}, sys.stdout)


if __name__ == "__main__":
    main(sys.argv)
