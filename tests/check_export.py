#!/usr/bin/env python3
"""Reads psflow checkpoint exports with nothing but the standard library,
as an independent check of the formats (safetensors: json + struct; npz:
zipfile + the .npy header).

Usage: check_export.py <file.safetensors> <file.npz> name=d0xd1 ...

Checks that both files hold exactly the named tensors with those shapes,
the same values in both, all finite, and the same metadata (safetensors'
__metadata__, the npz's __metadata__.json member), which names the model
(its config as JSON), its input and the layouts; prints one line and exits
0, or prints the problem and exits 1.
"""
import ast
import json
import math
import struct
import sys
import zipfile


def fail(message):
    print("check_export: " + message)
    sys.exit(1)


def count(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    body = data[8 + n:]
    metadata = header.pop("__metadata__", {})
    tensors = {}
    ranges = []
    for name, info in header.items():
        if info["dtype"] != "F32":
            fail("%s: dtype %s" % (name, info["dtype"]))
        begin, end = info["data_offsets"]
        if end - begin != 4 * count(info["shape"]):
            fail("%s: %d bytes for shape %s" % (name, end - begin, info["shape"]))
        ranges.append((begin, end))
        values = struct.unpack("<%df" % count(info["shape"]), body[begin:end])
        tensors[name] = (list(info["shape"]), values)
    ranges.sort()
    position = 0
    for begin, end in ranges:  # the spec requires no holes
        if begin != position:
            fail("safetensors data has a hole or overlap at %d" % begin)
        position = end
    if position != len(body):
        fail("safetensors has %d bytes after its tensors" % (len(body) - position))
    return metadata, tensors


def read_npz(path):
    tensors = {}
    metadata = None
    with zipfile.ZipFile(path) as archive:
        bad = archive.testzip()
        if bad is not None:
            fail("npz member %s fails its CRC" % bad)
        for member in archive.namelist():
            raw = archive.read(member)
            if member == "__metadata__.json":
                metadata = json.loads(raw.decode("utf-8"))
                continue
            if raw[:8] != b"\x93NUMPY\x01\x00":
                fail("%s is not a .npy 1.0 file" % member)
            (length,) = struct.unpack("<H", raw[8:10])
            if (10 + length) % 16 != 0:
                fail("%s: the .npy header does not end on an aligned offset" % member)
            header = ast.literal_eval(raw[10:10 + length].decode("latin1"))
            if header["descr"] != "<f4" or header["fortran_order"]:
                fail("%s: header %r" % (member, header))
            shape = list(header["shape"])
            data = raw[10 + length:]
            if len(data) != 4 * count(shape):
                fail("%s: %d bytes for shape %s" % (member, len(data), shape))
            tensors[member[:-len(".npy")]] = (
                shape, struct.unpack("<%df" % count(shape), data))
    if metadata is None:
        fail("the npz has no __metadata__.json member")
    return metadata, tensors


def main(argv):
    if len(argv) < 4:
        fail(__doc__)
    metadata, safetensors = read_safetensors(argv[1])
    npz_metadata, npz = read_npz(argv[2])
    if dict(npz_metadata, format="pt") != metadata:
        fail("the metadata differ: safetensors %s, npz %s" % (metadata, npz_metadata))
    for key in ("model", "input", "layout"):
        if key not in metadata:
            fail("the metadata do not name the %s: %s" % (key, metadata))
    json.loads(metadata["model"])  # the model config, as JSON
    if "[in, out]" not in metadata["layout"]:
        fail("the layout does not give the kernels' [in, out]: %s" % metadata["layout"])
    expected = {}
    for spec in argv[3:]:
        name, dims = spec.split("=")
        expected[name] = [int(d) for d in dims.split("x")]
    for label, tensors in (("safetensors", safetensors), ("npz", npz)):
        shapes = {name: shape for name, (shape, _) in tensors.items()}
        if shapes != expected:
            fail("%s holds %s, expected %s" % (label, shapes, expected))
    for name in expected:
        a = safetensors[name][1]
        b = npz[name][1]
        if a != b:
            fail("%s differs between the two files" % name)
        if not all(math.isfinite(x) for x in a):
            fail("%s has non-finite values" % name)
        if all(x == 0 for x in a) and "kernel" in name:
            fail("%s is all zeros: not a trained model" % name)
    print("check_export: OK, %d tensors, global_step %s, model %s" %
          (len(expected), metadata.get("global_step"), metadata["model"]))


if __name__ == "__main__":
    main(sys.argv)
