#!/usr/bin/env python3
"""peer_compare: psflow against PyTorch on the same model, data and
schedule, run alternately: the default job, the convnet and the CTR job.

Each round runs, per job, psflow's side and PyTorch's one after the other
on the same machine (which side goes first alternates from round to
round):

  default  psflow: `psctl local --job=configs/fashion_mnist_mlp.json --ps=1
           --workers=2 --evaluator --device=cpu` (TLS and tokens on, as the
           README's quick start; 12 epochs). PyTorch: the twin of the same
           job (same model, data, batch, Adam, cosine schedule) in
           DistributedDataParallel over gloo, 2 processes x 1 thread
           (--peer, by default the workplace's
           ../shared/peers/torch_fmnist.py --mode=ddp).
  convnet  bench/convnet_accuracy.py's two runs:
           configs/fashion_mnist_convnet.json through `psctl local` (2
           workers, 1 ps, evaluator; --convnet_mode, --convnet_epochs, the
           cosine decay over that run's own updates) and
           bench/convnet_torch.py with the same schedule, shards and
           shuffles at --threads threads.
  ctr      configs/ctr_wide_deep.json as shipped (200k + 50k generated
           examples, generated first if missing with `psctl data synth-ctr`
           and the config's data.synthesize; batch 256, 2 epochs, async)
           through `psctl local --ps=2 --workers=2 --evaluator
           --device=cpu`, and bench/ctr_torch.py on the same files with
           the same config at --threads threads.

Every psflow run starts from scratch (its own run folder; no checkpoint to
resume). PyTorch runs in --python (Debian's python3-torch) with
OMP_WAIT_POLICY=--omp_wait_policy (PASSIVE: Debian's torch runs its GEMMs
in OpenBLAS beside its OpenMP pool, and idle OpenMP threads spinning take
the cores from OpenBLAS's; bench/RESULTS.md, "Whole job against PyTorch")
and with the OpenBLAS kernels psflow's own binaries pick (--torch_blas:
on a VM whose CPU model OpenBLAS does not recognize, psflow's roles start
again with OPENBLAS_CORETYPE=SkylakeX or Haswell, model/device/cpu/
blas_kernels.h; PyTorch gets the same, so both sides multiply with the
same kernels). An environment setting given to this script wins.

Prints, per run, a markdown row: the whole command's wall time (start-up,
data loading, training, the final evaluation, as a user waits for it), its
CPU seconds (user + system of every process it started, from the
children's rusage), the final test accuracy (AUC for the CTR job), the
training examples/s (psflow: the sum of the workers' own rates from their
"finished:" lines, first to last step; PyTorch: what each twin times,
its training loop), the 1-minute load average before the run and the
cores other processes kept busy during it, and for psflow the CPU seconds
by process (sampled) and where each worker's time went. Then, per job, the
medians: psflow's wall time as a fraction of PyTorch's, the examples/s
ratio, the accuracy (or AUC) difference, and the workers' time shares.

  bazel build --config=opt //client/psctl:psctl //ps:ps_server //worker \\
      //chief //evaluator
  bash tools/setup.sh --bench       # PyTorch
  python3 bench/peer_compare.py --jobs=default,convnet,ctr --rounds=3

convnet_accuracy.py (either update mode, any epochs, one side alone) and
ctr_accuracy.py / ctr_torch.py (other data sets and settings) still run on
their own.
"""

import argparse
import collections
import contextlib
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import convnet_accuracy  # bench/, this script's folder
import proc_cpu
import zoo_compare

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_PEER = os.path.join(REPO, "..", "shared", "peers", "torch_fmnist.py")
CTR_CONFIG = os.path.join(REPO, "configs", "ctr_wide_deep.json")
JOBS = ["default", "convnet", "ctr"]
FINISHED = re.compile(r"(worker-\d+).*finished: .*\(([\d.]+) examples/s\).*"
                      r"time: compute ([\d.]+)%, pull wait ([\d.]+)%, "
                      r"push wait ([\d.]+)%, other ([\d.]+)%")


def own_cpu_s():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Meter:
    """Meters what runs inside `with`: wall seconds, the CPU seconds of
    every child process waited for (rusage), the cores other processes
    kept busy meanwhile (the machine's busy time less the children's and
    this script's own), and, sampled every `every` seconds, each
    descendant's CPU seconds by process name (bench/proc_cpu.py's
    reading; a process's last sample counts)."""

    def __init__(self, every=0.5):
        self.every = every
        self.by_name = {}

    def __enter__(self):
        self.load = os.getloadavg()[0]
        self._busy = zoo_compare.busy_cpu_s()
        self._own = zoo_compare.children_cpu_s()
        self._self = own_cpu_s()
        self._last = {}  # pid -> (name, CPU seconds)
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._start = time.monotonic()
        self._sampler.start()
        return self

    def _sample(self):
        me = os.getpid()
        while True:
            stop = self._stop.wait(self.every)
            kids = proc_cpu.children_map()
            stack = list(kids.get(me, []))
            while stack:
                pid = stack.pop()
                stack.extend(kids.get(pid, []))
                got = proc_cpu.cpu_of(pid)
                if got is not None:
                    self._last[pid] = got
            if stop:
                return

    def __exit__(self, *unused):
        self.wall = time.monotonic() - self._start
        self._stop.set()
        self._sampler.join()
        self.cpu = zoo_compare.children_cpu_s() - self._own
        self.others = max(0.0, zoo_compare.busy_cpu_s() - self._busy -
                          self.cpu - (own_cpu_s() - self._self)) / self.wall
        by_name = collections.defaultdict(float)
        for name, cpu in self._last.values():
            by_name[name] += cpu
        self.by_name = dict(by_name)
        return False


@contextlib.contextmanager
def environment(settings):
    """os.environ with `settings` added (a variable already set wins) for
    the commands run inside `with`."""
    added = [k for k in settings if k not in os.environ]
    for k in added:
        os.environ[k] = settings[k]
    try:
        yield
    finally:
        for k in added:
            del os.environ[k]


def torch_environment(args):
    """The environment PyTorch's side runs in (module docstring); main()
    keeps it in args.torch_env."""
    env = {"OMP_WAIT_POLICY": args.omp_wait_policy}
    kernels = args.torch_blas
    if kernels == "auto":
        kernels = better_blas_kernels(args)
    if kernels and kernels != "detected":
        env["OPENBLAS_CORETYPE"] = kernels
    return env


def better_blas_kernels(args):
    """The kernels model/device/cpu/blas_kernels.cc starts psflow's roles
    with, for PyTorch's OpenBLAS: SkylakeX or Haswell where OpenBLAS's own
    pick (OPENBLAS_VERBOSE) is older than the CPU (an AVX-512 or AVX2 CPU
    it did not recognize), else "" (OpenBLAS's pick stays)."""
    product = "import torch; torch.ones(2, 2) @ torch.ones(2, 2)"
    probe = subprocess.run(
        [args.python, "-c", product],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=dict(os.environ, OPENBLAS_VERBOSE="2"))
    chosen = re.search(r"^Core: (\S+)", probe.stdout, re.M)
    if not chosen or chosen.group(1).lower() in (
            "haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"):
        return ""
    with open("/proc/cpuinfo") as f:
        flags = set(re.search(r"^flags\s*: (.*)$", f.read(), re.M)
                    .group(1).split())
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags:
        return "SkylakeX"
    if {"avx2", "fma"} <= flags:
        return "Haswell"
    return ""


def run(cmd, args, side):
    """Runs `cmd` to its end under a Meter: (meter, output); exits naming
    the side on failure."""
    with Meter() as meter:
        out = subprocess.run(cmd, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True,
                             timeout=args.timeout_s)
    if out.returncode != 0:
        sys.exit(f"{side} failed (exit {out.returncode}):\n" +
                 out.stdout[-4000:])
    return meter, out.stdout


def workers_finished(output):
    """[(worker, examples/s, compute %, pull wait %, push wait %, other %)]
    from the workers' "finished:" lines in psctl local's output."""
    return [(m.group(1),) + tuple(float(v) for v in m.groups()[1:])
            for m in FINISHED.finditer(output)]


def psflow_row(meter, metric, output):
    """A psflow run's record from its meter, metric and psctl's output."""
    workers = sorted(workers_finished(output))
    return {"wall": meter.wall, "cpu": meter.cpu, "metric": metric,
            "rate": sum(w[1] for w in workers) if workers else None,
            "load": meter.load, "others": meter.others,
            "by_name": meter.by_name, "workers": workers}


def psctl_local(args, job, run_dir, *flags):
    return [os.path.join(args.bin_dir, "client/psctl/psctl"), "local",
            "--job=" + job, "--evaluator", "--device=cpu",
            "--dir=" + run_dir, "--bin_dir=" + args.bin_dir,
            # A fresh job every round (a committed config resumes from its
            # checkpoints otherwise).
            "--checkpoint_dir=" + os.path.join(run_dir, "checkpoints")
            ] + list(flags)


def psflow_default(args, work):
    run_dir = tempfile.mkdtemp(prefix="default-", dir=work)
    meter, out = run(psctl_local(
        args, os.path.join(REPO, "configs/fashion_mnist_mlp.json"), run_dir,
        "--ps=1", "--workers=2"), args, "psflow default job")
    with open(os.path.join(run_dir, "result.json")) as f:
        result = json.load(f)
    return psflow_row(meter, result["test_accuracy"], out)


def torch_default(args, work):
    with environment(args.torch_env):
        meter, out = run([args.python, args.peer, "--mode=ddp", "--world=2",
                          "--threads=1"], args, "PyTorch default job")
    result = {}
    for line in out.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT "):])
    return {"wall": meter.wall, "cpu": meter.cpu,
            "metric": result.get("final_test_accuracy"),
            "rate": result.get("examples_per_s"), "load": meter.load,
            "others": meter.others}


def convnet_args(args):
    """bench/convnet_accuracy.py's settings for this comparison."""
    return argparse.Namespace(
        bin_dir=args.bin_dir, mode=args.convnet_mode,
        epochs=args.convnet_epochs, torch_threads=args.threads,
        python=args.python, timeout_s=args.timeout_s)


def psflow_convnet(args, work):
    with Meter() as meter:
        accuracy, _, _, _, out = convnet_accuracy.run_psflow(
            convnet_args(args))
    return psflow_row(meter, accuracy, out)


def torch_convnet(args, work):
    settings = convnet_args(args)
    batch = convnet_accuracy.job_config(settings)["training"]["batch_size"]
    with environment(args.torch_env), Meter() as meter:
        accuracy, _, updates, seconds = convnet_accuracy.run_torch(settings)
    # The async twin's updates are one batch each; sync's one per worker.
    per_update = convnet_accuracy.WORKERS if args.convnet_mode == "sync" \
        else 1
    return {"wall": meter.wall, "cpu": meter.cpu, "metric": accuracy,
            "rate": updates * per_update * batch / seconds,
            "load": meter.load, "others": meter.others}


def ctr_data(args):
    """The CTR config's data folder, generated first when missing (as
    psctl local would, but before any run is timed)."""
    with open(CTR_CONFIG) as f:
        data = json.load(f)["data"]
    folder = os.path.dirname(data["train_path"])
    if not all(os.path.exists(p) for p in (
            data["train_path"], data["test_path"],
            os.path.join(folder, "planted.json"))):
        cmd = [os.path.join(args.bin_dir, "client/psctl/psctl"), "data",
               "synth-ctr", "--out_dir=" + folder, "--overwrite"]
        for key, value in data.get("synthesize", {}).items():
            if value is True:
                cmd.append("--" + key)
            elif value is not False:
                cmd.append("--%s=%s" % (key, value))
        print("generating the CTR data set: " + " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
    return data["train_path"], data["test_path"]


def psflow_ctr(args, work):
    run_dir = tempfile.mkdtemp(prefix="ctr-", dir=work)
    meter, out = run(psctl_local(args, CTR_CONFIG, run_dir, "--ps=2",
                                 "--workers=2"), args, "psflow CTR job")
    with open(os.path.join(run_dir, "result.json")) as f:
        result = json.load(f)
    return psflow_row(meter, result["test_auc"], out)


def torch_ctr(args, work):
    train, test = ctr_data(args)
    with environment(args.torch_env):
        meter, out = run([args.python,
                          os.path.join(REPO, "bench", "ctr_torch.py"),
                          "--train=" + train, "--test=" + test,
                          "--config=" + CTR_CONFIG,
                          "--threads=%d" % args.threads],
                         args, "PyTorch CTR job (ctr_torch.py)")
    m = re.search(r"^RESULT ctr_torch examples_per_sec=(\d+) .*"
                  r"test_auc=([\d.]+)", out, re.M)
    if not m:
        sys.exit("ctr_torch.py printed no RESULT line:\n" + out[-3000:])
    return {"wall": meter.wall, "cpu": meter.cpu, "metric": float(m.group(2)),
            "rate": float(m.group(1)), "load": meter.load,
            "others": meter.others}


SIDES = {"default": (psflow_default, torch_default),
         "convnet": (psflow_convnet, torch_convnet),
         "ctr": (psflow_ctr, torch_ctr)}
METRIC = {"default": "accuracy", "convnet": "accuracy", "ctr": "AUC"}


def by_process(by_name):
    """ "ps_server 12.0, worker 9.1, ..." (CPU seconds, largest first)."""
    return ", ".join("%s %.1f" % (name, cpu) for name, cpu in sorted(
        by_name.items(), key=lambda kv: -kv[1]) if cpu >= 0.05)


def difference(job, ours, theirs):
    if METRIC[job] == "AUC":
        return "%+.4f AUC" % (ours - theirs)
    return "%+.2f points" % (100 * (ours - theirs))


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", default=",".join(JOBS),
                        help="comma-separated, of " + ", ".join(JOBS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bin_dir", default=os.path.join(REPO, "bazel-bin"))
    parser.add_argument("--peer", default=DEFAULT_PEER,
                        help="the default job's PyTorch twin "
                        "(torch_fmnist.py)")
    parser.add_argument("--python", default="/usr/bin/python3",
                        help="the Python that has Debian's python3-torch")
    parser.add_argument("--threads", type=int, default=2,
                        help="PyTorch's threads for the convnet and CTR "
                        "jobs (psflow's 2 workers have 1 each; the default "
                        "job's DDP is always 2 processes x 1 thread)")
    parser.add_argument("--convnet_epochs", type=float, default=1)
    parser.add_argument("--convnet_mode", choices=["async", "sync"],
                        default="async")
    parser.add_argument("--omp_wait_policy", default="PASSIVE",
                        help="OMP_WAIT_POLICY for PyTorch's side")
    parser.add_argument("--torch_blas", default="auto",
                        help="OPENBLAS_CORETYPE for PyTorch's side: auto "
                        "(what psflow's binaries pick on this CPU), "
                        "detected (OpenBLAS's own pick) or a core type")
    parser.add_argument("--timeout_s", type=int, default=1800,
                        help="limit for each run")
    args = parser.parse_args()
    jobs = args.jobs.split(",")
    for job in jobs:
        if job not in SIDES:
            parser.error("unknown job %r (jobs: %s)" % (job, ", ".join(JOBS)))
    psctl = os.path.join(args.bin_dir, "client/psctl/psctl")
    if not os.path.exists(psctl):
        sys.exit(f"no {psctl}: build first with bazel build --config=opt "
                 "//client/psctl:psctl //ps:ps_server //worker //chief "
                 "//evaluator (the last build picks bazel-bin), or pass "
                 "--bin_dir")
    if "default" in jobs and not os.path.exists(args.peer):
        sys.exit(f"no PyTorch twin at {args.peer}; pass --peer=PATH")
    if "ctr" in jobs:
        ctr_data(args)
    args.torch_env = torch_environment(args)
    work = tempfile.mkdtemp(prefix="peer_compare-")
    print("peer_compare: %d cores; run folders in %s; PyTorch's side with "
          "%s" % (os.cpu_count(), work, " ".join(
              "%s=%s" % (k, os.environ.get(k, v))
              for k, v in sorted(args.torch_env.items()))))
    print()
    print("| round | job | side | wall s | CPU s | accuracy / AUC | "
          "examples/s | load before / others' cores | psflow CPU s by "
          "process; workers' compute / pull wait / push wait / other |")
    print("|---:|---|---|---:|---:|---:|---:|---:|---|")
    runs = {job: {"psflow": [], "pytorch": []} for job in jobs}
    for r in range(1, args.rounds + 1):
        for job in jobs:
            # Alternate which side goes first, so neither always runs on a
            # machine the other just warmed.
            sides = ["psflow", "pytorch"] if r % 2 else ["pytorch", "psflow"]
            for side in sides:
                row = SIDES[job][side == "pytorch"](args, work)
                runs[job][side].append(row)
                where = ""
                if side == "psflow":
                    where = "; ".join(
                        [by_process(row["by_name"])] +
                        ["%s %.0f / %.0f / %.1f / %.0f%%" % ((w[0],) + w[2:])
                         for w in row["workers"]])
                print("| %d | %s | %s | %.1f | %.1f | %.4f | %s | %.1f / "
                      "%.1f | %s |" % (
                          r, job, side, row["wall"], row["cpu"],
                          row["metric"],
                          "{:,.0f}".format(row["rate"]) if row["rate"]
                          else "",
                          row["load"], row["others"], where), flush=True)

    print()
    print("| job | wall s psflow / PyTorch | psflow / PyTorch wall | "
          "examples/s psflow / PyTorch | examples/s ratio | accuracy / AUC "
          "psflow / PyTorch | difference | CPU s psflow / PyTorch | psflow "
          "workers' compute / pull wait / push wait / other |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for job in jobs:
        ours, theirs = runs[job]["psflow"], runs[job]["pytorch"]
        m = {(side, key): median([row[key] for row in rows])
             for side, rows in (("psflow", ours), ("pytorch", theirs))
             for key in ("wall", "cpu", "metric", "rate")}
        shares = [median([w[k] for row in ours for w in row["workers"]])
                  for k in range(2, 6)]
        rates = m["psflow", "rate"], m["pytorch", "rate"]
        print("| %s | %.1f / %.1f | **%.2fx** | %s | %s | %.4f / %.4f | %s | "
              "%.1f / %.1f | %s |" % (
                  job, m["psflow", "wall"], m["pytorch", "wall"],
                  m["psflow", "wall"] / m["pytorch", "wall"],
                  "{:,.0f} / {:,.0f}".format(*rates) if all(rates) else "",
                  "%.2fx" % (rates[0] / rates[1]) if all(rates) else "",
                  m["psflow", "metric"], m["pytorch", "metric"],
                  difference(job, m["psflow", "metric"],
                             m["pytorch", "metric"]),
                  m["psflow", "cpu"], m["pytorch", "cpu"],
                  "%.0f / %.0f / %.1f / %.0f%%" % tuple(shares)
                  if None not in shares else ""))
    print()
    print("Medians of %d round%s; wall: the whole command's; examples/s: "
          "psflow's workers' own rates summed, PyTorch's timed training "
          "loop." % (args.rounds, "" if args.rounds == 1 else "s"))


if __name__ == "__main__":
    main()
