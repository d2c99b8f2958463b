#!/usr/bin/python3
"""Replays graph_step_dump's steps with the PyTorch twin (torch_twin.py) and
compares every number: each step's mean loss, the probabilities
(Model::Score, inference mode), every variable's gradient (for
BatchNormalization's moving statistics: the batch statistics psflow pushes)
and every table row's gradient.

  /usr/bin/python3 model/graph/parity/parity_check.py DUMP.json... \\
      [--dtype=float64|float32]

The twin starts from the dump's initial values and rows and takes its own
SGD steps from its own gradients (the same rule as the dump: trainable
values and rows v -= lr * g, moving statistics v = m v + (1 - m) stat), so
what is compared after step k is two independent trajectories.

The dump (step_dump.h): DUMP.json names the config and the graph (as psflow
parsed it), the input (num_dense, num_fields), num_ids rows per table, the
variables (name, shape, trainable, momentum) and tables (name, dim, the
fields whose ids they hold: none listed for every field) with
their initial values, and per step the batch (features, labels, bag
offsets and ids, as random_batches.h lays them out), the loss, the
probabilities and the gradients. Arrays are [offset, count] in float32s of
the blob beside it (DUMP.f32, little-endian).

Tolerances. psflow computes in float32, the twin by default in float64, so
the differences are psflow's rounding alone (with --dtype=float32, both
sides' rounding; measured the same size) (unit roundoff u = 2^-24, about
6e-8). A product of length n (here up to 429) is off by up to ~n u relative
in the worst case and ~sqrt(n) u typically; a forward pass chains up to ~6
of them, a backward pass about twice that, BatchNormalization's backward
multiplies by 1 / sqrt(batch variance + epsilon) (~16 here), and after the
first step the two sides' parameters also differ by the rounding of the
earlier steps. Measured on the zoo (3 steps, batch 16, printed by each run):
at most ~1.5e-7 on losses and probabilities and ~7e-7 on gradients; a
stress run (10 steps of batch 64 at learning rate 0.5) reaches 2.6e-5 on one
gradient, the last layer's bias, a single sum whose terms cancel. The bounds
leave a margin of about 100x at the test's settings:

- loss: relative 1e-5;
- probabilities: absolute 1e-5 (the sigmoid's slope is at most 1/4);
- gradients (variables, and each table's rows): per array,
  max |psflow - twin| <= 1e-4 * max(max |twin|, 1e-9) (the floor for
  arrays of zeros).
  Against the array's scale rather than each element's: an element whose
  terms cancel to near zero carries the terms' absolute rounding, not a
  relative one.

Any real mistake (a transposed kernel, a wrong triangle order, a gradient
share missed, a wrong epsilon) gives errors of order 1e-2 to 1.

Exit status 0 when every number of every dump is within its bound, 1
otherwise (each failing array named), 2 for usage errors.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_twin  # noqa: E402

LOSS_RTOL = 1e-5
PROBABILITY_ATOL = 1e-5
GRADIENT_RTOL = 1e-4
GRADIENT_FLOOR = 1e-9
MAX_FAILURES_SHOWN = 12


class Dump:
    def __init__(self, path):
        with open(path) as f:
            self.manifest = json.load(f)
        blob = os.path.join(os.path.dirname(path), self.manifest["blob"])
        self.blob = np.fromfile(blob, dtype="<f4")
        self.path = path

    def array(self, ref, shape=None):
        offset, count = ref
        if offset + count > self.blob.size:
            raise ValueError("%s: array [%d, %d] is past the blob's end (%d)"
                             % (self.path, offset, count, self.blob.size))
        a = self.blob[offset:offset + count]
        return a.reshape(shape) if shape is not None else a


def relative_error(psflow, twin):
    psflow = np.asarray(psflow, dtype=np.float64)
    twin = np.asarray(twin, dtype=np.float64)
    scale = np.max(np.abs(twin)) if twin.size else 0.0
    diff = np.max(np.abs(psflow - twin)) if twin.size else 0.0
    return diff / max(scale, GRADIENT_FLOOR), scale


def check(path, dtype):
    """Returns (failures, worst errors by kind, summary line)."""
    dump = Dump(path)
    m = dump.manifest
    num_fields = m["input"]["num_fields"]
    twin = torch_twin.GraphTwin(m["graph"], [m["input"]["num_dense"]],
                                num_fields, m["input"]["num_classes"],
                                m["num_ids"], dtype)
    failures = []

    # The twin read the same graph: same shapes, variables and tables.
    for value in m["values"]:
        if twin.shapes.get(value["name"]) != value["shape"]:
            failures.append("%s: shape %s in psflow, %s in the twin" % (
                value["name"], value["shape"], twin.shapes.get(value["name"])))
    psflow_vars = [(v["name"], v["shape"], v["trainable"])
                   for v in m["variables"]]
    twin_vars = [(n, s, t) for n, s, t, _ in twin.variables]
    if psflow_vars != twin_vars:
        failures.append("variables differ: psflow %s, twin %s" %
                        (psflow_vars, twin_vars))
    if [(t["name"], t["dim"]) for t in m["tables"]] != \
            list(twin.table_dims.items()):
        failures.append("tables differ: psflow %s, twin %s" %
                        (m["tables"], twin.table_dims))
    if failures:
        return failures, {}, ""

    variables = m["variables"]
    twin.load_values(
        {v["name"]: dump.array(v["initial"]) for v in variables},
        {t["name"]: dump.array(t["initial"]) for t in m["tables"]})
    lr = m["learning_rate"]
    worst = {"loss": 0.0, "probabilities": 0.0, "gradients": 0.0,
             "rows": 0.0}
    worst_name = {}

    def note(kind, name, err, bound):
        if err > worst[kind]:
            worst[kind], worst_name[kind] = err, name
        if not err <= bound:  # NaN fails too
            failures.append("%s %s: error %.3g > %.3g" % (kind, name, err,
                                                          bound))

    for k, step in enumerate(m["steps"]):
        size = step["size"]
        features = torch.as_tensor(
            dump.array(step["features"], (size, m["input"]["num_dense"])))
        labels = torch.as_tensor(step["labels"])
        bags = (torch.as_tensor(step["ids"], dtype=torch.int64),
                torch.as_tensor(step["offsets"], dtype=torch.int64))
        twin.zero_grad(set_to_none=True)
        logits = twin(features, *bags, training=True)
        batch_stats = dict(twin.batch_stats)
        loss = twin.loss_of(logits, labels)
        loss.backward()
        with torch.no_grad():
            probabilities = twin.probabilities(
                twin(features, *bags, training=False))
        err = abs(step["loss"] - loss.item()) / abs(loss.item())
        note("loss", "step %d" % k, err, LOSS_RTOL)
        err = float(np.max(np.abs(
            dump.array(step["probabilities"]).astype(np.float64) -
            probabilities.numpy())))
        note("probabilities", "step %d" % k, err, PROBABILITY_ATOL)

        twin_grads = {}
        for v in variables:
            name = v["name"]
            if v["trainable"]:
                g = twin.params[name].grad
                g = torch.zeros_like(twin.params[name]) if g is None else g
            else:
                g = batch_stats[name]
            twin_grads[name] = g.detach()
        for v, ref in zip(variables, step["gradients"]):
            name = v["name"]
            err, _ = relative_error(dump.array(ref),
                                    twin_grads[name].numpy().reshape(-1))
            note("gradients", "step %d %s" % (k, name), err, GRADIENT_RTOL)
        for t, ref in zip(m["tables"], step["row_gradients"]):
            g = twin.tables[t["name"]].grad
            err, _ = relative_error(dump.array(ref), g.numpy().reshape(-1))
            note("rows", "step %d %s" % (k, t["name"]), err, GRADIENT_RTOL)

        # The dump's update rule, on the twin's own gradients.
        with torch.no_grad():
            for name, _, trainable, momentum in twin.variables:
                if trainable:
                    twin.params[name] -= lr * twin_grads[name]
                else:
                    twin.moving[name] = (momentum * twin.moving[name] +
                                         (1 - momentum) * twin_grads[name])
            for table in twin.tables.values():
                table -= lr * table.grad

    summary = "%-24s %d steps  worst: loss %.2e, probabilities %.2e, " \
        "gradients %.2e (%s), rows %.2e" % (
            os.path.basename(m["config"]), len(m["steps"]), worst["loss"],
            worst["probabilities"], worst["gradients"],
            worst_name.get("gradients", "-"), worst["rows"])
    return failures, worst, summary


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dumps", nargs="+", help="graph_step_dump manifests")
    parser.add_argument("--dtype", choices=["float64", "float32"],
                        default="float64",
                        help="the twin's precision (float64: a reference "
                        "whose own rounding is negligible)")
    args = parser.parse_args()
    dtype = torch.float64 if args.dtype == "float64" else torch.float32
    torch.set_num_threads(1)
    failed = False
    for path in args.dumps:
        failures, _, summary = check(path, dtype)
        if summary:
            print(summary)
        name = os.path.basename(path)
        for failure in failures[:MAX_FAILURES_SHOWN]:
            print("FAIL %s: %s" % (name, failure))
        if len(failures) > MAX_FAILURES_SHOWN:
            print("FAIL %s: ... and %d more" % (
                name, len(failures) - MAX_FAILURES_SHOWN))
        failed = failed or bool(failures)
    print("parity: %s (twin in %s; bounds: loss rel %.0e, probabilities abs "
          "%.0e, gradients %.0e of each array's max)" % (
              "FAILED" if failed else "ok", args.dtype, LOSS_RTOL,
              PROBABILITY_ATOL, GRADIENT_RTOL))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
