#!/usr/bin/python3
"""psflow's CPU backend against PyTorch eager on the Keras guide convnet:
forward + backward per example, same model, batch and thread count,
measured alternately in one run (so both see the same machine state).

  bazel build --config=opt //bench:convnet_bench
  bench/convnet_bench.py --threads=1 --batch=64 --pairs=5
  bench/convnet_bench.py --device=cuda --pairs=5       # on a GPU machine
  bench/convnet_bench.py --bench=gpu_bundle/bin/convnet_bench --device=cuda
      # with the GPU bundle (bench/gpu/make_bundle.sh)

Prints each pair and the median ratio (PyTorch time / psflow time: above 1
means psflow is faster), then psflow's per-layer table.
"""
import argparse
import os
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(REPO, "bazel-bin", "bench", "convnet_bench")
JOB = os.path.join(REPO, "configs", "fashion_mnist_convnet.json")
TORCH = os.path.join(REPO, "bench", "convnet_torch.py")


def run(argv):
    out = subprocess.run(argv, check=True, capture_output=True, text=True,
                         cwd=REPO).stdout
    return float(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--bench", default=BENCH, help="the convnet_bench binary")
    parser.add_argument("--python", default="/usr/bin/python3",
                        help="a python3 with PyTorch")
    args = parser.parse_args()
    if not os.path.exists(args.bench):
        sys.exit("build it first: bazel build --config=opt //bench:convnet_bench")
    common = ["--threads=%d" % args.threads, "--batch=%d" % args.batch,
              "--device=" + args.device]
    ratios = []
    for pair in range(args.pairs):
        ours = run([args.bench, "--job=" + JOB, "--total_only", "--rounds=3"] +
                   common)
        theirs = run([args.python, TORCH, "speed", "--rounds=3"] + common)
        ratios.append(theirs / ours)
        print("pair %d: psflow %.1f us/example, PyTorch %.1f us/example, "
              "ratio %.2f" % (pair + 1, ours, theirs, theirs / ours), flush=True)
    print("median ratio (PyTorch time / psflow time): %.2f over %d pairs, "
          "%s, %d thread(s), batch %d" % (statistics.median(ratios), args.pairs,
                                         args.device, args.threads, args.batch))
    print(subprocess.run([args.bench, "--job=" + JOB] + common, check=True,
                         capture_output=True, text=True, cwd=REPO).stdout,
          end="")


if __name__ == "__main__":
    main()
