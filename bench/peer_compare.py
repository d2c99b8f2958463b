#!/usr/bin/env python3
"""peer_compare: psflow's default job against PyTorch DDP, run alternately.

One round runs, one after the other on the same machine:
  psflow   `psctl local --job=configs/fashion_mnist_mlp.json --ps=1
            --workers=2 --evaluator` (TLS and tokens on, as the README's
            quick start), CPU workers;
  pytorch  the PyTorch twin of the same job (same model, data, batch, Adam,
            cosine schedule, 12 epochs): DistributedDataParallel over gloo,
            2 processes x 1 thread (--peer, by default the workplace's
            ../shared/peers/torch_fmnist.py).
Each side's wall time is the whole command's (start-up, data loading,
training, the final evaluation), as a user waits for it. Prints a markdown
row per run, then the medians, psflow's time as a fraction of PyTorch's,
and where psflow's workers spent their training time (the "finished:"
lines: compute, pull wait, push wait).

  bazel build --config=opt //client/psctl:psctl //ps:ps_server //worker \\
      //chief //evaluator
  bash tools/setup.sh --bench       # PyTorch
  python3 bench/peer_compare.py --rounds=3

The convnet and CTR comparisons are bench/convnet_accuracy.py and
bench/ctr_accuracy.py (bench/RESULTS.md).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_PEER = os.path.join(REPO, "..", "shared", "peers", "torch_fmnist.py")


def timed(cmd, args, side):
    """Runs `cmd` to its end: (wall seconds, its output); exits on failure."""
    start = time.monotonic()
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, timeout=args.timeout_s)
    wall = time.monotonic() - start
    if out.returncode != 0:
        sys.exit(f"{side} run failed:\n" + out.stdout[-4000:])
    return wall, out.stdout


def run_psflow(args, workdir):
    run_dir = tempfile.mkdtemp(prefix="psflow-", dir=workdir)
    cmd = [
        os.path.join(args.bin_dir, "client/psctl/psctl"), "local",
        "--job=" + os.path.join(REPO, "configs/fashion_mnist_mlp.json"),
        "--ps=1", "--workers=2", "--evaluator", "--device=cpu",
        "--dir=" + run_dir, "--bin_dir=" + args.bin_dir,
        # A fresh job every round (the default job resumes from its
        # checkpoints otherwise).
        "--checkpoint_dir=" + os.path.join(run_dir, "checkpoints"),
    ]
    wall, out = timed(cmd, args, "psflow")
    with open(os.path.join(run_dir, "result.json")) as f:
        result = json.load(f)
    shares = []
    for line in out.splitlines():
        m = re.search(r"finished: .*time: compute ([\d.]+)%, pull wait "
                      r"([\d.]+)%, push wait ([\d.]+)%", line)
        if m:
            shares.append(tuple(float(v) for v in m.groups()))
    return wall, result.get("test_accuracy"), shares


def run_torch(args):
    cmd = [args.python, args.peer, "--mode=ddp", "--world=2",
           "--threads=1"]
    wall, out = timed(cmd, args, "PyTorch")
    accuracy = None
    for line in out.splitlines():
        if line.startswith("RESULT "):
            accuracy = json.loads(line[len("RESULT "):]).get(
                "final_test_accuracy")
    return wall, accuracy


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bin_dir", default=os.path.join(REPO, "bazel-bin"))
    parser.add_argument("--peer", default=DEFAULT_PEER,
                        help="the PyTorch twin (torch_fmnist.py)")
    parser.add_argument("--python", default="/usr/bin/python3",
                        help="the Python that has Debian's python3-torch")
    parser.add_argument("--timeout_s", type=int, default=900)
    args = parser.parse_args()
    psctl = os.path.join(args.bin_dir, "client/psctl/psctl")
    if not os.path.exists(psctl):
        sys.exit(f"no {psctl}: build first with bazel build --config=opt "
                 "//client/psctl:psctl //ps:ps_server //worker //chief "
                 "//evaluator (the last build picks bazel-bin), or pass "
                 "--bin_dir")
    if not os.path.exists(args.peer):
        sys.exit(f"no PyTorch twin at {args.peer}; pass --peer=PATH")
    workdir = tempfile.mkdtemp(prefix="peer_compare-")
    print("| round | side | wall s | test accuracy | workers' compute / "
          "pull wait / push wait |")
    print("|---:|---|---:|---:|---|")
    ours, theirs, ours_acc, theirs_acc, compute, pull = [], [], [], [], [], []
    for r in range(1, args.rounds + 1):
        # Alternate which side goes first, so neither always runs on a
        # machine the other just warmed.
        sides = ["psflow", "pytorch"] if r % 2 else ["pytorch", "psflow"]
        for side in sides:
            if side == "psflow":
                wall, acc, shares = run_psflow(args, workdir)
                ours.append(wall)
                ours_acc.append(acc)
                compute += [s[0] for s in shares]
                pull += [s[1] for s in shares]
                where = "; ".join("%.0f%% / %.0f%% / %.1f%%" % s
                                  for s in shares)
            else:
                wall, acc = run_torch(args)
                theirs.append(wall)
                theirs_acc.append(acc)
                where = ""
            print(f"| {r} | {side} | {wall:.1f} | {acc:.4f} | {where} |",
                  flush=True)
    ratio = statistics.median(ours) / statistics.median(theirs)
    print()
    print(f"medians: psflow {statistics.median(ours):.1f} s at accuracy "
          f"{statistics.median(ours_acc):.4f}; PyTorch DDP "
          f"{statistics.median(theirs):.1f} s at "
          f"{statistics.median(theirs_acc):.4f}; psflow/PyTorch wall time "
          f"{ratio:.2f}x; psflow workers' compute "
          f"{statistics.median(compute):.0f}%, pull wait "
          f"{statistics.median(pull):.0f}%")


if __name__ == "__main__":
    main()
