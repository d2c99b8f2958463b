#!/usr/bin/env python3
"""zoo_compare: each model-zoo job (docs/models.md) trained by psflow and by
its PyTorch twin on the same files, one after the other, with test AUC and
examples/s side by side.

Per config:
  psflow   `psctl local --job=CONFIG --ps=2 --workers=2 --evaluator
            --device=cpu` (the built binaries; the data set is generated on
            first use into the config's data folder,
            /tmp/psflow-data/ctr_synthetic for the zoo);
  pytorch  bench/zoo_torch.py: the graph's twin (the one
            //model/graph/parity:torch_parity_test checks), same files,
            initial values, Adagrad and learning rates, batches and epochs,
            --threads threads, in Debian's /usr/bin/python3.
Optionally both pinned to the same cores (--cpus, taskset).

Rates: psflow "workers" is the sum of the workers' own rates (their
"finished" lines: examples over first to last step), which is what
zoo_torch.py times (training steps, data loaded); "job" is global step x
batch / the chief's training_seconds (also the workers' loading and the
final evaluation). The ratio is psflow's workers rate over PyTorch's.
Other work on the machine slows either side: before each run the script
waits (up to --settle_s) for the 1-minute load average to fall below
--settle_load and records it, and it records how many cores other
processes kept busy during each run (the machine's busy CPU time from
/proc/stat less the run's own, over its wall time).

  bazel build --config=opt //client/psctl:psctl //ps:ps_server //worker \\
      //chief //evaluator
  python3 bench/zoo_compare.py [--bin_dir=bazel-bin] [--threads=2] \\
      [--cpus=0-1] [--configs=configs/ctr_dlrm.json,...] \\
      [--train_examples=2000000 --test_examples=200000]

With --train_examples, every config trains on a set of that size instead
of its own (a copy of the config in the work folder names it; the data is
generated once, by the first psflow run, into
/tmp/psflow-data/ctr_zoo_<train>_<test>, with the config's other generator
settings).

Prints progress, then a markdown table (bench/RESULTS.md, "Model zoo").
"""

import argparse
import glob
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZOO = ["configs/ctr_dlrm.json", "configs/ctr_dcn_v2.json",
       "configs/ctr_deepfm.json", "configs/ctr_wide_deep_graph.json"]


def busy_cpu_s():
    """CPU seconds the whole machine has been busy (/proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu_s():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def settle(args):
    """Waits (at most --settle_s) for the 1-minute load average to drop
    below --settle_load: the previous run's own load fades too. Returns
    the load average then."""
    deadline = time.monotonic() + args.settle_s
    while os.getloadavg()[0] >= args.settle_load and \
            time.monotonic() < deadline:
        time.sleep(5)
    return os.getloadavg()[0]


def run(cmd, args, side, log_path):
    """Runs `cmd` to its end under taskset when --cpus is given. Returns
    (wall s, output, others): others is the cores that processes other
    than this run kept busy meanwhile, on average (the machine's busy CPU
    time less the run's own, over the wall time). Exits naming the side and
    the log on failure."""
    if args.cpus:
        cmd = ["taskset", "-c", args.cpus] + cmd
    busy, own = busy_cpu_s(), children_cpu_s()
    start = time.monotonic()
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, timeout=args.timeout_s)
    wall = time.monotonic() - start
    others = max(0.0, (busy_cpu_s() - busy) - (children_cpu_s() - own)) / wall
    with open(log_path, "w") as f:
        f.write(out.stdout)
    if out.returncode != 0:
        sys.exit("%s failed (exit %d), log %s:\n%s" % (
            side, out.returncode, log_path, out.stdout[-3000:]))
    return wall, out.stdout, others


def run_psflow(config, args, work):
    job = json.load(open(config))
    run_dir = os.path.join(work, "psflow_" + job["name"])
    wall, _, others = run([os.path.join(args.bin_dir, "client/psctl/psctl"),
                           "local",
                           "--job=" + config, "--ps=2",
                           "--workers=%d" % args.workers, "--evaluator",
                           "--device=cpu", "--dir=" + run_dir,
                           "--bin_dir=" + args.bin_dir],
                          args, "psflow " + config, run_dir + ".log")
    result = json.load(open(os.path.join(run_dir, "result.json")))
    rates = []
    for path in sorted(glob.glob(os.path.join(run_dir, "worker*.log"))):
        for line in open(path, errors="replace"):
            m = re.search(r"finished: .*\((\d+) examples/s\)", line)
            if m:
                rates.append(int(m.group(1)))
    batch = job["training"]["batch_size"]
    return {"auc": result["test_auc"], "loss": result["test_loss"],
            "workers_rate": sum(rates),
            "job_rate": result["global_step"] * batch /
            result["training_seconds"], "wall": wall, "others": others}


def run_torch(config, args, work):
    name = os.path.splitext(os.path.basename(config))[0]
    wall, out, others = run(
        [args.python, os.path.join(REPO, "bench/zoo_torch.py"),
         "--config=" + config, "--threads=%d" % args.threads,
         "--workers=%d" % args.workers],
        args, "zoo_torch " + config, os.path.join(work, "torch_%s.log" % name))
    m = re.search(r"^RESULT zoo_torch .*examples_per_sec=(\d+) .*"
                  r"test_auc=([\d.]+) test_logloss=([\d.]+)", out, re.M)
    if not m:
        sys.exit("zoo_torch %s printed no RESULT line" % config)
    return {"rate": int(m.group(1)), "auc": float(m.group(2)),
            "loss": float(m.group(3)), "wall": wall, "others": others}


def resized(config, args, work):
    """`config`, or a copy of it in `work` that trains on a generated set of
    --train_examples (and --test_examples) examples."""
    if not args.train_examples:
        return config
    job = json.load(open(config))
    data_dir = "/tmp/psflow-data/ctr_zoo_%d_%d" % (args.train_examples,
                                                  args.test_examples)
    data = job["data"]
    data["train_path"] = os.path.join(data_dir, "train.txt")
    data["test_path"] = os.path.join(data_dir, "test.txt")
    synthesize = dict(data.get("synthesize", {}))
    synthesize["train_examples"] = args.train_examples
    synthesize["test_examples"] = args.test_examples
    synthesize.setdefault("seed", 1)
    data["synthesize"] = synthesize
    path = os.path.join(work, os.path.basename(config))
    with open(path, "w") as f:
        json.dump(job, f, indent=1)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", default=",".join(ZOO),
                        help="comma-separated job configs (default: the zoo)")
    parser.add_argument("--bin_dir", default=os.path.join(REPO, "bazel-bin"))
    parser.add_argument("--python", default="/usr/bin/python3",
                        help="an interpreter that imports torch")
    parser.add_argument("--threads", type=int, default=2,
                        help="PyTorch's threads")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cpus", default="",
                        help="taskset -c list for both sides (default: none)")
    parser.add_argument("--timeout_s", type=int, default=1200)
    parser.add_argument("--settle_load", type=float, default=1.0,
                        help="before each run, wait for the 1-minute load "
                        "average to drop below this (the previous run's "
                        "own load included) ...")
    parser.add_argument("--settle_s", type=int, default=150,
                        help="... for at most this many seconds")
    parser.add_argument("--train_examples", type=int, default=0,
                        help="train every config on a generated set of this "
                        "many examples (default: the config's own data)")
    parser.add_argument("--test_examples", type=int, default=200000,
                        help="with --train_examples: its test set's size")
    parser.add_argument("--work_dir", default="",
                        help="logs and run folders (default: a new temporary "
                        "folder, kept)")
    args = parser.parse_args()
    work = args.work_dir or tempfile.mkdtemp(prefix="zoo_compare_")
    os.makedirs(work, exist_ok=True)
    print("zoo_compare: logs in %s; %d cores; PyTorch %d threads%s" % (
        work, os.cpu_count(), args.threads,
        ", both on cores " + args.cpus if args.cpus else ""))

    rows = []
    for config in args.configs.split(","):
        if not os.path.isabs(config):
            config = os.path.join(REPO, config)
        name = os.path.basename(config)
        config = resized(config, args, work)
        p_load = settle(args)
        p = run_psflow(config, args, work)
        print("psflow  %s: AUC %.4f, %d examples/s (workers), %.0f (job); "
              "load %.2f before, others %.2f cores during" % (
                  name, p["auc"], p["workers_rate"], p["job_rate"], p_load,
                  p["others"]))
        sys.stdout.flush()
        t_load = settle(args)
        t = run_torch(config, args, work)
        print("pytorch %s: AUC %.4f, %d examples/s; load %.2f before, others "
              "%.2f cores during" % (name, t["auc"], t["rate"], t_load,
                                     t["others"]))
        sys.stdout.flush()
        rows.append((name, p, t, p_load, t_load))

    print()
    print("| config | AUC psflow | AUC PyTorch | difference | psflow "
          "examples/s: workers / job | PyTorch examples/s | ratio: workers "
          "/ job | wall s psflow / PyTorch | load before psflow / PyTorch | "
          "others' cores during psflow / PyTorch |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, p, t, p_load, t_load in rows:
        print("| %s | %.4f | %.4f | %+.4f | %d / %.0f | %d | %.2fx / %.2fx | "
              "%.0f / %.0f | %.2f / %.2f | %.2f / %.2f |" % (
                  name, p["auc"], t["auc"], p["auc"] - t["auc"],
                  p["workers_rate"], p["job_rate"], t["rate"],
                  p["workers_rate"] / t["rate"], p["job_rate"] / t["rate"],
                  p["wall"], t["wall"], p_load, t_load, p["others"],
                  t["others"]))


if __name__ == "__main__":
    main()
