#!/usr/bin/env python3
"""How long a job takes to end: the default job's last step to psctl's exit.

Runs `psctl local` on configs/fashion_mnist_mlp.json (1 parameter server,
2 workers with worker 0 as chief, 1 evaluator, CPU) `--runs` times and
prints, per run, the seconds from the last worker's "finished:" line (its
last step) to psctl's exit: the final checkpoint, the final evaluation,
the tasks hearing the outcome and every process exiting. With `--bin_dir`
it runs other binaries (e.g. a copy of an older build) through this
psctl's --bin_dir, so two builds can be compared in alternating runs.

Build first:
  bazel build --config=opt //client/psctl:psctl //ps:ps_server //worker \
      //chief //evaluator
Then, from the repository root:
  python3 bench/job_end.py [--runs=3] [--bin_dir=DIR --psctl=DIR/...]

Timings only: nothing here passes or fails.
"""

import argparse
import datetime
import os
import re
import shutil
import subprocess
import tempfile
import time

FINISHED = re.compile(
    r"I(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) worker-\d+\] finished:")


def run_once(psctl, bin_dir, directory):
    command = [psctl, "local", "--job=configs/fashion_mnist_mlp.json",
               "--ps=1", "--workers=2", "--evaluator", "--device=cpu",
               f"--dir={directory}"]
    if bin_dir:
        command.append(f"--bin_dir={bin_dir}")
    load = os.getloadavg()[0]
    output = subprocess.run(command, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            check=True).stdout
    exited = time.time()
    # The roles log local time with milliseconds.
    last = max(datetime.datetime.strptime(t, "%Y-%m-%d %H:%M:%S.%f")
               for t in FINISHED.findall(output))
    return exited - last.timestamp(), load


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--psctl", default="bazel-bin/client/psctl/psctl")
    parser.add_argument("--bin_dir", default="")
    args = parser.parse_args()
    for run in range(1, args.runs + 1):
        directory = tempfile.mkdtemp(prefix="job_end_")
        try:
            seconds, load = run_once(args.psctl, args.bin_dir, directory)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        print(f"run {run}: last step to exit {seconds:.3f} s "
              f"(load average {load:.1f})")


if __name__ == "__main__":
    main()
