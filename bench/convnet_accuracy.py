#!/usr/bin/env python3
"""convnet_accuracy: the Keras guide convnet trained by psflow and by PyTorch
with the same model, schedule and data order, in one update mode.

Runs configs/fashion_mnist_convnet.json through `psctl local` (2 workers,
1 parameter server, an evaluator; CPU workers) with the given mode and
epochs, the cosine decay spanning that mode's own global steps, then
bench/convnet_torch.py with the same settings (--mode=async takes the
workers' batches in turn, one update each; --mode=sync averages one batch
of every worker per update). Prints one markdown row: both final test
accuracies, their difference, the wall times, and where psflow's workers
spent their training time (compute, waiting for parameters, waiting for
pushes; from each worker's "finished" line) with the servers' staleness.

  bazel build --config=opt //client/psctl:psctl //ps:ps_server //worker \\
      //chief //evaluator
  bash tools/setup.sh --bench       # PyTorch
  python3 bench/convnet_accuracy.py --mode=async --epochs=20
  python3 bench/convnet_accuracy.py --mode=sync --epochs=20

--only=psflow or --only=torch runs one side (the other column stays empty).
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
WORKERS = 2


def job_config(args):
    with open(os.path.join(REPO, "configs", "fashion_mnist_convnet.json")) as f:
        job = json.load(f)
    job.pop("checkpoint", None)
    training = job["training"]
    training["mode"] = args.mode.upper()
    training["epochs"] = args.epochs
    updates = args.epochs * EXAMPLES / training["batch_size"]
    if args.mode == "sync":
        updates /= WORKERS
        # Refused in SYNC (a SYNC worker pulls once its step closes).
        training.pop("parameter_prefetch", None)
        if args.sync_group_bytes is not None:
            training["sync_group_bytes"] = args.sync_group_bytes
    job["learning_rate"]["decay_steps"] = int(math.ceil(updates))
    return job


def run_psflow(args):
    """(accuracy, training seconds, wall seconds, notes, psctl's output)."""
    job = job_config(args)
    with tempfile.TemporaryDirectory(prefix="convnet_accuracy_") as tmp:
        job_path = os.path.join(tmp, "job.json")
        with open(job_path, "w") as f:
            json.dump(job, f)
        cmd = [os.path.join(args.bin_dir, "client/psctl/psctl"), "local",
               "--job=" + job_path, "--workers=%d" % WORKERS, "--ps=1",
               "--evaluator", "--dir=" + os.path.join(tmp, "run"),
               "--bin_dir=" + args.bin_dir, "--device=cpu",
               "--timeout_s=%d" % args.timeout_s]
        start = time.monotonic()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        wall = time.monotonic() - start
        if proc.returncode != 0:
            sys.stderr.write(proc.stdout[-4000:])
            sys.exit("psctl local failed (exit %d)" % proc.returncode)
        with open(os.path.join(tmp, "run", "result.json")) as f:
            result = json.load(f)
    notes = []
    phases = re.findall(r"(worker-\d).*finished: .*time: compute ([\d.]+)%, "
                        r"pull wait ([\d.]+)%, push wait ([\d.]+)%, "
                        r"other ([\d.]+)%", proc.stdout)
    for worker, compute, pull, push, other in phases:
        notes.append("%s: compute %s%%, pull wait %s%%, push wait %s%%, "
                     "other %s%%" % (worker, compute, pull, push, other))
    rates = re.findall(r"(worker-\d).*finished: .*\(([\d.]+) examples/s\)",
                       proc.stdout)
    if rates:
        notes.append("%.0f examples/s in all" %
                     sum(float(r) for _, r in rates))
    staleness = re.search(r"staleness of \d+ applied gradients: mean ([\d.]+)",
                          proc.stdout)
    if staleness:
        notes.append("staleness mean %s" % staleness.group(1))
    # training.parameter_prefetch's choice, per worker (worker/trainer.cc).
    prefetched = re.findall(r"next parameters prefetched in (\d+)% of steps",
                            proc.stdout)
    if prefetched:
        notes.append("prefetched in %s%% of steps" % "/".join(prefetched))
    return (result["test_accuracy"], result["training_seconds"], wall,
            "; ".join(notes), proc.stdout)


def run_torch(args):
    """(accuracy, wall seconds, updates, seconds from the first update to
    the end of the test evaluation)."""
    cmd = [args.python, os.path.join(REPO, "bench", "convnet_torch.py"),
           "train", "--mode=" + args.mode, "--epochs=%g" % args.epochs,
           "--workers=%d" % WORKERS, "--threads=%d" % args.torch_threads]
    start = time.monotonic()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        sys.exit("convnet_torch.py failed (exit %d)" % proc.returncode)
    final = re.search(r"final test accuracy ([\d.]+) after (\d+) steps "
                      r"\(([\d.]+) s\)", proc.stdout)
    return (float(final.group(1)), wall, int(final.group(2)),
            float(final.group(3)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin_dir", default=os.path.join(REPO, "bazel-bin"))
    parser.add_argument("--mode", choices=["async", "sync"], default="async")
    parser.add_argument("--epochs", type=float, default=20)
    parser.add_argument("--torch_threads", type=int, default=2)
    parser.add_argument("--python", default="/usr/bin/python3",
                        help="the Python that has Debian's python3-torch")
    parser.add_argument("--only", choices=["psflow", "torch"], default=None)
    parser.add_argument("--sync_group_bytes", type=int, default=None,
                        help="--mode=sync: training.sync_group_bytes for "
                        "psflow (0: no overlap; unset: the default)")
    parser.add_argument("--timeout_s", type=int, default=3600)
    args = parser.parse_args()
    ours = run_psflow(args) if args.only != "torch" else None
    theirs = run_torch(args) if args.only != "psflow" else None
    print("| mode | epochs | psflow accuracy | PyTorch accuracy | difference | "
          "psflow training / wall | PyTorch wall | psflow workers |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    print("| %s | %g | %s | %s | %s | %s | %s | %s |" % (
        args.mode, args.epochs,
        "%.4f" % ours[0] if ours else "",
        "%.4f" % theirs[0] if theirs else "",
        "%+.2f points" % (100 * (ours[0] - theirs[0])) if ours and theirs
        else "",
        "%.0f s / %.0f s" % (ours[1], ours[2]) if ours else "",
        "%.0f s" % theirs[1] if theirs else "",
        ours[3] if ours else ""), flush=True)


if __name__ == "__main__":
    main()
