#!/usr/bin/env python3
"""How the chief behaves as a job grows: `psctl local` at several sizes.

Runs a tiny async job (an MLP with 16 hidden units on Fashion-MNIST, batch
32, no evaluator) at each workers x ps size, every process on this host,
and prints per size:

  start->joined   seconds from psctl's start to the chief's "all N workers
                  joined; training"
  start->step>0   seconds from psctl's start to the first `psctl status`
                  answer with a global step above 0 (polled every
                  0.25 s until then, plus one psctl run's time)
  train s         the chief's training phase: "joined" to "training reached
                  global step"
  chief cpu s     the chief's user+system CPU over the training phase
                  (/proc/<pid>/stat)
  cpu ms/hb       that CPU divided by the heartbeats it received then:
                  workers x training seconds (a worker reports once a
                  second). It also pays for the chief's own once-a-second
                  checks and the status polls below, so it is an upper
                  bound on a heartbeat's cost.
  status ms       median and max round trip of `psctl status
                  --tf_config=<dir>/tf_config/chief-0.json` while training
                  (a whole psctl process: start-up, TLS, one DescribeJob)
  end->exit s     seconds from the chief's "training reached global step"
                  to the last of the job's processes exiting
  chief MiB       the chief's peak RSS (VmHWM)

Build first:
  bazel build --config=opt //client/psctl:psctl //chief //worker \
      //ps:ps_server //evaluator
Then, from the repository root:
  python3 bench/chief_scale.py [--sizes=4x1,16x4,64x16] [--steps=100000]

Timings only: nothing here passes or fails (tests/scale_test.cc checks that
such jobs succeed).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

DATA = "/usr/share/datasets/fashion-mnist/"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def job_config(steps, batch):
    return {
        "name": "chief-scale",
        "model": {"mlp": {"hidden_sizes": [16]}},
        "optimizer": {"kind": "ADAM"},
        "learning_rate": {"kind": "CONSTANT", "learning_rate": 0.002},
        "data": {
            "train_images": DATA + "train-images-idx3-ubyte.gz",
            "train_labels": DATA + "train-labels-idx1-ubyte.gz",
            "test_images": DATA + "t10k-images-idx3-ubyte.gz",
            "test_labels": DATA + "t10k-labels-idx1-ubyte.gz",
        },
        "training": {"batch_size": batch, "steps": steps, "mode": "ASYNC",
                     "seed": 3},
    }


def proc_children(pid):
    """The pids whose parent is pid."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(entry))
    return out


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")[0].decode()
    except OSError:
        return ""


def cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def vm_hwm_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


class Run:
    """One `psctl local` job, watched."""

    def __init__(self, args, workers, ps):
        self.args, self.workers, self.ps = args, workers, ps
        self.dir = tempfile.mkdtemp(prefix=f"chief_scale_{workers}x{ps}_")
        self.events = {}  # name -> monotonic time
        self.cpu_at = {}  # name -> chief CPU seconds at that event
        self.status_ms = []
        self.first_step_s = None
        self.chief_pid = None
        self.hwm = 0.0
        self.lines = []
        self.lock = threading.Lock()

    def mark(self, name):
        with self.lock:
            if name in self.events:
                return
            self.events[name] = time.monotonic()
            if self.chief_pid is not None:
                self.cpu_at[name] = cpu_seconds(self.chief_pid)

    def read_output(self, proc):
        for raw in proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            self.lines.append(line)
            if "workers joined; training" in line:
                self.mark("joined")
            elif "training reached global step" in line:
                self.mark("trained")

    def poll_status(self, stop):
        tf_config = os.path.join(self.dir, "tf_config", "chief-0.json")
        psctl = os.path.join(self.args.bin_dir, "client/psctl/psctl")
        while not stop.is_set():
            if "joined" in self.events and os.path.exists(tf_config):
                begin = time.monotonic()
                answer = subprocess.run(
                    [psctl, "status", "--tf_config=" + tf_config,
                     "--timeout=10"], capture_output=True, text=True)
                took = time.monotonic() - begin
                if "trained" not in self.events and answer.returncode == 0:
                    self.status_ms.append(took * 1000)
                step = re.search(r"global step (\d+)", answer.stdout)
                if (self.first_step_s is None and step
                        and int(step.group(1)) > 0):
                    self.first_step_s = time.monotonic() - self.start
            # Often until the first step shows, then seldom: each answer
            # costs the chief a DescribeJob, which the CPU column counts.
            stop.wait(0.25 if self.first_step_s is None
                      else self.args.status_every_s)

    def run(self):
        job_path = os.path.join(self.dir, "job.json")
        with open(job_path, "w") as f:
            json.dump(job_config(self.args.steps, self.args.batch), f)
        argv = [os.path.join(self.args.bin_dir, "client/psctl/psctl"),
                "local", "--job=" + job_path, "--dir=" + self.dir,
                "--bin_dir=" + self.args.bin_dir, "--device=cpu", "--chief",
                "--evaluator=false", f"--ps={self.ps}",
                f"--workers={self.workers}", "--stall_timeout_s=600"] + self.args.extra
        self.start = time.monotonic()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        reader = threading.Thread(target=self.read_output, args=(proc,))
        reader.start()
        stop = threading.Event()
        poller = threading.Thread(target=self.poll_status, args=(stop,))
        poller.start()
        tasks = set()
        last_task_exit = None
        while proc.poll() is None:
            children = set(proc_children(proc.pid))
            if self.chief_pid is None:
                for pid in children:
                    if cmdline(pid).endswith("chief/chief"):
                        self.chief_pid = pid
            if self.chief_pid is not None:
                hwm = vm_hwm_mib(self.chief_pid)
                if hwm:
                    self.hwm = max(self.hwm, hwm)
            if tasks - children:
                last_task_exit = time.monotonic()
            tasks = (tasks & children) | children
            time.sleep(0.1)
        end = time.monotonic()
        stop.set()
        poller.join()
        reader.join()
        self.exit_code = proc.returncode
        self.last_exit = end if last_task_exit is None else max(
            last_task_exit, end - 0.1)
        return self

    def row(self):
        e = self.events
        joined, trained = e.get("joined"), e.get("trained")
        train_s = trained - joined if joined and trained else None
        cpu = None
        if self.cpu_at.get("joined") is not None and \
                self.cpu_at.get("trained") is not None:
            cpu = self.cpu_at["trained"] - self.cpu_at["joined"]
        per_hb = cpu / (self.workers * train_s) * 1000 if cpu is not None \
            and train_s else None
        return {
            "size": f"{self.workers}x{self.ps}",
            "exit": self.exit_code,
            "start_to_joined_s": joined - self.start if joined else None,
            "start_to_first_step_s": self.first_step_s,
            "train_s": train_s,
            "chief_cpu_s": cpu,
            "cpu_ms_per_heartbeat": per_hb,
            "status_ms_median": statistics.median(self.status_ms)
            if self.status_ms else None,
            "status_ms_max": max(self.status_ms) if self.status_ms else None,
            "status_answers": len(self.status_ms),
            "end_to_exit_s": self.last_exit - trained if trained else None,
            "chief_peak_rss_mib": self.hwm or None,
            "dir": self.dir,
        }


def fmt(value, digits=2):
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="4x1,16x4,64x16",
                        help="workers x ps, comma-separated")
    parser.add_argument("--steps", type=int, default=100000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--status_every_s", type=float, default=2.0)
    parser.add_argument("--bin_dir", default="bazel-bin")
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("extra", nargs="*",
                        help="more psctl local flags, after --")
    args = parser.parse_args()
    rows = []
    for size in args.sizes.split(","):
        workers, ps = (int(x) for x in size.split("x"))
        run = Run(args, workers, ps).run()
        row = run.row()
        rows.append(row)
        if run.exit_code != 0:
            sys.stderr.write("\n".join(run.lines[-30:]) + "\n")
        print(json.dumps(row), file=sys.stderr, flush=True)
    header = ("size", "exit", "start->joined s", "start->step>0 s",
              "train s", "chief cpu s", "cpu ms/hb", "status ms med/max",
              "end->exit s", "chief MiB")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join([
            r["size"], fmt(r["exit"]), fmt(r["start_to_joined_s"], 1),
            fmt(r["start_to_first_step_s"], 1), fmt(r["train_s"], 1),
            fmt(r["chief_cpu_s"]), fmt(r["cpu_ms_per_heartbeat"]),
            f"{fmt(r['status_ms_median'], 0)}/{fmt(r['status_ms_max'], 0)}",
            fmt(r["end_to_exit_s"], 1), fmt(r["chief_peak_rss_mib"], 1),
        ]) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
