#!/usr/bin/env python3
"""straggler_bench: async, sync and bounded staleness with one slow worker.

Runs the default job (configs/fashion_mnist_mlp.json: Fashion-MNIST MLP,
Adam, 12 epochs) through `psctl local` with 4 workers and 1 parameter
server and a straggler (--straggler, passed to `psctl local`):

  3:4           worker 3 is slow on every step (each takes 4 times its
                compute time): a persistent straggler;
  rotate:4:50   the workers take turns of 50 ms, one slow at a time: a
                transient straggler;
  none          no straggler;

once per update mode:

  async, async + staleness-aware rate, sync (all 4 aggregated),
  sync with one backup worker (3 of 4), bounded s=2 and s=8, each with and
  without the staleness-aware rate

and prints one markdown row per run: final test accuracy, training time,
wall time, and what the parameter server logged (staleness of the applied
gradients, pulls that waited for a slower worker). Every run trains the same
number of examples (12 epochs); the cosine decay spans each mode's own
global steps.

  bazel build --config=opt //client/psctl:psctl //ps:ps_server //worker \\
      //chief //evaluator
  python3 bench/straggler_bench.py --bin_dir=bazel-bin [--straggler=3:4]
"""

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = 60000  # Fashion-MNIST's training set

MODES = [
    # (label, training fields)
    ("async", {"mode": "ASYNC"}),
    ("async + staleness-aware rate",
     {"mode": "ASYNC", "staleness_aware_learning_rate": True}),
    ("sync, 4 of 4", {"mode": "SYNC"}),
    ("sync, 3 of 4 (1 backup)", {"mode": "SYNC", "replicas_to_aggregate": 3}),
    ("bounded s=2", {"mode": "BOUNDED", "max_staleness": 2}),
    ("bounded s=2 + staleness-aware rate",
     {"mode": "BOUNDED", "max_staleness": 2,
      "staleness_aware_learning_rate": True}),
    ("bounded s=8", {"mode": "BOUNDED", "max_staleness": 8}),
    ("bounded s=8 + staleness-aware rate",
     {"mode": "BOUNDED", "max_staleness": 8,
      "staleness_aware_learning_rate": True}),
]


def job_config(training_fields, workers):
    with open(os.path.join(REPO, "configs", "fashion_mnist_mlp.json")) as f:
        job = json.load(f)
    job.pop("checkpoint", None)
    training = job["training"]
    training.update(training_fields)
    # Global steps of this mode: a sync step aggregates K batches.
    batches = training["epochs"] * EXAMPLES / training["batch_size"]
    if training["mode"] == "SYNC":
        batches /= training.get("replicas_to_aggregate", workers)
    job["learning_rate"]["decay_steps"] = int(math.ceil(batches))
    return job


def run(label, training_fields, args):
    job = job_config(training_fields, args.workers)
    with tempfile.TemporaryDirectory(prefix="straggler_") as tmp:
        job_path = os.path.join(tmp, "job.json")
        with open(job_path, "w") as f:
            json.dump(job, f)
        cmd = [os.path.join(args.bin_dir, "client/psctl/psctl"), "local",
               "--job=" + job_path, "--workers=%d" % args.workers, "--ps=1",
               "--dir=" + os.path.join(tmp, "run"),
               "--bin_dir=" + args.bin_dir, "--device=cpu",
               "--timeout_s=%d" % args.timeout_s]
        if args.straggler != "none":
            cmd.append("--straggler=" + args.straggler)
        start = time.monotonic()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        wall = time.monotonic() - start
        if proc.returncode != 0:
            sys.stderr.write(proc.stdout[-4000:])
            return "| %s | failed (exit %d) | | | |" % (label, proc.returncode)
        with open(os.path.join(tmp, "run", "result.json")) as f:
            result = json.load(f)
    staleness = re.search(r"staleness of \d+ applied gradients: mean ([\d.]+)",
                          proc.stdout)
    waits = re.search(r"bounded staleness: (\d+) pulls waited for a slower "
                      r"worker, ([\d.]+) s", proc.stdout)
    notes = []
    if staleness:
        notes.append("staleness mean %s" % staleness.group(1))
    if waits:
        notes.append("%s waits, %s s" % (waits.group(1), waits.group(2)))
    dropped = re.search(r"(\d+) stale dropped", proc.stdout)
    if dropped and int(dropped.group(1)) > 0:
        notes.append("%s stale gradients dropped" % dropped.group(1))
    return "| %s | %.4f | %.1f s | %.1f s | %s |" % (
        label, result["test_accuracy"], result["training_seconds"], wall,
        "; ".join(notes))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin_dir", default=os.path.join(REPO, "bazel-bin"))
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--straggler", default="3:4",
                        help="psctl local --straggler: <worker>:<factor>, "
                             "rotate:<factor>:<ms>, or none")
    parser.add_argument("--modes", default="",
                        help="comma-separated indexes into the mode list "
                             "(default: all)")
    parser.add_argument("--timeout_s", type=int, default=900)
    args = parser.parse_args()
    modes = MODES
    if args.modes:
        modes = [MODES[int(i)] for i in args.modes.split(",")]
    print("%d workers, 1 ps, --straggler=%s; CPU: %s, %d cores" % (
        args.workers, args.straggler, cpu_model(), os.cpu_count()))
    print()
    print("| mode | final test accuracy | training time | wall time | "
          "parameter server |")
    print("|---|---:|---:|---:|---|")
    for label, fields in modes:
        print(run(label, fields, args), flush=True)


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


if __name__ == "__main__":
    main()
