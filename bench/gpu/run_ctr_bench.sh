#!/usr/bin/env bash
# Issue 18's whole-job speed comparison on the 16-core GPU host, from a
# bundle made by make_bundle.sh, plus the GPU tests as a regression check:
#
#   1. the GPU tests (PSFLOW_REQUIRE_GPU=1), pinned to cores 8-15 and run in
#      the background while step 2 uses cores 0-1;
#   2. configs/ctr_wide_deep.json's data set (psctl data synth-ctr: 200k
#      training + 50k test examples, seed 1, as data.synthesize writes it),
#      then on the SAME cores, one after the other:
#        psflow: psctl local --ps=2 --workers=2 --evaluator --device=cpu
#        PyTorch: bench/ctr_torch.py --threads=<cores>
#      on cores 0-1 (2 threads) and then cores 0-7 (8 threads);
#   3. when time is left (CTR_BUDGET_S, default 370 s from the start), the
#      2M set (ctr_accuracy.py's: 2,000,000 + 200,000, seed 1), one epoch of
#      each at batch 512 on cores 0-7.
#
# Every process of each run is timed with bench/proc_cpu.py (CPU seconds
# per role). For a dry run on a small machine: CTR_WIDE_CPUS=0-1
# CTR_WIDE_THREADS=2 CTR_BIG_TRAIN=100000 run the later steps there too.
#
#   bash bench/gpu/run_ctr_bench.sh gpu_bundle[.tar.xz] [out_dir]
#
# psflow's examples/s is given two ways: the workers' own (each worker's
# "finished" line: its examples over its time from its first step to its
# last, after loading its data; summed), which is what ctr_torch.py times
# (training steps only, data loaded beforehand), and the job's (global step
# x batch / the chief's training_seconds, which also holds the workers'
# loading of the data files and the last evaluation). Writes
# ctr_summary.md (and a few logs) to out_dir (default: $OUT when set).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$here/bundle_env.sh"
t0=$SECONDS
budget="${CTR_BUDGET_S:-370}"
bundle="$(open_bundle "${1:?usage: run_ctr_bench.sh <bundle> [out_dir]}")" || exit 1
out="${2:-${OUT:-ctr_bench_out}}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
work=/tmp/ctr_bench_work
rm -rf "$work"
mkdir -p "$work"
summary="$out/ctr_summary.md"
: >"$summary"
say() { echo "$@" | tee -a "$summary"; }
failed=0
use_bundle_libraries "$bundle" >"$work/libraries.log" 2>&1 || {
  cat "$work/libraries.log"
  exit 1
}
psctl="$bundle/bin/client/psctl/psctl"
if ! command -v taskset >/dev/null 2>&1; then
  # An image without util-linux's taskset: the same through Python.
  mkdir -p "$work/bin"
  cat >"$work/bin/taskset" <<'PY'
#!/usr/bin/env python3
import os, sys
assert sys.argv[1] == "-c"
cpus = set()
for part in sys.argv[2].split(","):
    a, _, b = part.partition("-")
    cpus.update(range(int(a), int(b or a) + 1))
os.sched_setaffinity(0, cpus)
os.execvp(sys.argv[3], sys.argv[3:])
PY
  chmod +x "$work/bin/taskset"
  export PATH="$work/bin:$PATH"
fi
torch_python="${TORCH_PYTHON:-python3}"
cores="$(nproc)"
wide_cpus="${CTR_WIDE_CPUS:-0-7}"
wide_threads="${CTR_WIDE_THREADS:-8}"
big_train="${CTR_BIG_TRAIN:-2000000}"
big_test=$((big_train / 10))
wide=0
{ [ "$cores" -ge 8 ] || [ -n "${CTR_WIDE_CPUS:-}" ]; } && wide=1
left() { echo $((budget + 20 - (SECONDS - t0))); }

say "# psflow CTR whole job against PyTorch ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
say
say '```'
head -3 "$bundle/MANIFEST" | tee -a "$summary"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee -a "$summary"
echo "host: $cores cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(uname -srm)" |
  tee -a "$summary"
"$torch_python" -c 'import torch, numpy, sys; print("python %s, torch %s, numpy %s, torch parallel: %s" % (sys.version.split()[0], torch.__version__, numpy.__version__, torch.__config__.parallel_info().splitlines()[0:4]))' 2>&1 |
  tee -a "$summary"
say '```'

# --- 0. OpenBLAS on this host: the core type it picked (a VM can hide the
# CPU from its detection), and the job's MLP step (429-256-128, batch 256,
# 1 thread: a worker's GEMMs) with that and other core types forced.
say
say "## OpenBLAS: the job's MLP step (step_bench 429-256-128-2, batch 256, 1 thread, core 0)"
say '```'
for flag in avx2 avx512f; do
  grep -qw "$flag" /proc/cpuinfo && echo "cpu has $flag" || echo "cpu lacks $flag"
done | tee -a "$summary"
blas_env=""
best_rate=0
for coretype in ${CTR_BLAS_ENV:+none} "" Haswell SkylakeX Sandybridge; do
  [ "$coretype" = none ] && break  # forced below: no need to measure
  line="$(env ${coretype:+OPENBLAS_CORETYPE=$coretype} OPENBLAS_VERBOSE=2 taskset -c 0 \
    "$bundle/bin/step_bench" --device=cpu --model=custom --input=429 --hidden=256,128 \
    --classes=2 --batch=256 --cpu_threads=1 --repeats=3 2>&1 | grep -E '^Core|^RESULT' | tr '\n' ' ')"
  rate="$(echo "$line" | sed -n 's/.*examples_per_sec=\([0-9]*\).*/\1/p')"
  say "${coretype:-detected}: $(echo "$line" | sed 's/RESULT step_bench.*examples_per_sec=\([0-9]*\) step_ms=\([0-9.]*\).*/\1 examples\/s, \2 ms per step/')"
  if [ -n "$rate" ] && [ "$rate" -gt "$best_rate" ]; then
    best_rate=$rate
    [ -n "$coretype" ] && blas_env="OPENBLAS_CORETYPE=$coretype" || blas_env=""
    [ -z "$coretype" ] && detected_rate=$rate
  fi
done
# Only a clear gain (> 20% over what OpenBLAS picked) counts.
if [ -n "$blas_env" ] && [ "$best_rate" -lt $((${detected_rate:-0} * 12 / 10)) ]; then
  blas_env=""
fi
[ -n "${CTR_BLAS_ENV:-}" ] && blas_env="$CTR_BLAS_ENV"  # forced
say "best: ${blas_env:-as detected}"
say '```'

# --- 1. GPU tests in the background on cores 8-15 (when there are 16).
test_cores="8-$((cores - 1))"
[ "$cores" -ge 12 ] || test_cores="0-$((cores - 1))"
# all; blas: only the runs with blas_env and PyTorch's best at 8 threads;
# blas2c: only cores 0-1: psflow with blas_env, PyTorch's best, psflow.
mode="${CTR_ONLY:-all}"
[ "$mode" = all ] && (
  for test in "${GPU_TESTS[@]}"; do  # bundle_env.sh
    log="$work/$test.log"
    s=$SECONDS
    if PSFLOW_REQUIRE_GPU=1 taskset -c "$test_cores" "$bundle/bin/$test" >"$log" 2>&1; then
      echo "- $test: PASSED ($(grep -c '^\[       OK \]' "$log") tests, $((SECONDS - s)) s)"
    else
      echo "- $test: FAILED ($(grep -c '^\[       OK \]' "$log") passed, $(grep -c '^\[  FAILED  \]' "$log") failed lines, $((SECONDS - s)) s)"
      grep -E '^\[  FAILED  \]|Failure|rror' "$log" | head -15
      tail -5 "$log"
    fi
  done >"$work/gpu_tests.md" 2>&1
  echo done >"$work/gpu_tests.done"
) &
tests_pid=$!

# --- 2. Data.
gen() {  # <dir> <train> <test>
  if [ ! -e "$1/planted.json" ]; then
    "$psctl" data synth-ctr --out_dir="$1" --train_examples="$2" \
      --test_examples="$3" --seed=1 --threads=8 2>&1 | tee -a "$summary"
  fi
}
data200k=/tmp/psflow-data/ctr_synthetic
say
say "## Data"
say '```'
gen "$data200k" 200000 50000
say '```'

# A copy of configs/ctr_wide_deep.json with changes: <out> <data dir>
# [key=json ...] (dot-separated keys).
job_config() {
  python3 - "$repo/configs/ctr_wide_deep.json" "$@" <<'PY'
import json, sys
job = json.load(open(sys.argv[1]))
out, data_dir = sys.argv[2], sys.argv[3]
job.pop("checkpoint", None)
job["data"]["train_path"] = data_dir + "/train.txt"
job["data"]["test_path"] = data_dir + "/test.txt"
for setting in sys.argv[4:]:
    path, value = setting.split("=", 1)
    node = job
    keys = path.split(".")
    for k in keys[:-1]:
        node = node.setdefault(k, {})
    node[keys[-1]] = json.loads(value)
json.dump(job, open(out, "w"), indent=1)
PY
}

rows=()
# psflow's whole job on cores <cpus>: <name> <cpus> <config> [env]
run_psflow() {
  local dir="$work/job_$1" log="$work/job_$1.log" s=$SECONDS
  rm -rf "$dir"
  [ -n "${4:-}" ] && say "(psflow $1 with $4)"
  env ${4:-} timeout 200 taskset -c "$2" python3 "$repo/bench/proc_cpu.py" --out="$work/cpu_$1.txt" -- \
    "$psctl" local --job="$3" --ps=2 --workers=2 --evaluator \
    --device=cpu --dir="$dir" --bin_dir="$bundle/bin" >"$log" 2>&1 || {
    failed=1
    say "psflow $1 FAILED:"
    tail -20 "$log" | tee -a "$summary"
    return
  }
  python3 - "$dir" "$3" "$1" "$2" "$((SECONDS - s))" <<'PY' | tee -a "$summary"
import glob, json, re, sys
d, config, name, cpus, wall = sys.argv[1:]
job = json.load(open(config))
r = json.load(open(d + "/result.json"))
batch = job["training"]["batch_size"]
rates, secs, examples, shares = [], [], 0, []
for path in sorted(glob.glob(d + "/worker*.log")):
    for line in open(path, errors="replace"):
        m = re.search(r"finished: (\d+) steps, (\d+) examples.* in ([0-9.]+)s "
                      r"\((\d+) examples/s\).*time: (.*)$", line)
        if m:
            examples += int(m.group(2))
            secs.append(float(m.group(3)))
            rates.append(int(m.group(4)))
            shares.append(m.group(5).strip())
job_rate = r["global_step"] * batch / r["training_seconds"]
print("RESULT psflow name=%s cpus=%s workers_examples_per_sec=%d "
      "examples_over_slowest_worker=%.0f job_examples_per_sec=%.0f "
      "training_seconds=%.2f global_step=%d test_auc=%.4f test_loss=%.4f "
      "wall_s=%s" % (name, cpus, sum(rates), examples / max(secs or [1]),
                     job_rate, r["training_seconds"], r["global_step"],
                     r["test_auc"], r["test_loss"], wall))
for k, s in enumerate(shares):
    print("  worker %d: %d examples/s in %.1f s; %s" % (k, rates[k], secs[k], s))
PY
  sed 's/^/  /' "$work/cpu_$1.txt" | tee -a "$summary"
}
# PyTorch on the same cores: <name> <cpus> <threads> <data dir> <config>
# [limit s] [env]
run_torch() {
  local log="$work/torch_$1.log" s=$SECONDS
  env ${7:-} timeout "${6:-600}" taskset -c "$2" "$torch_python" "$repo/bench/ctr_torch.py" \
    --train="$4/train.txt" --test="$4/test.txt" --config="$5" \
    --threads="$3" >"$log" 2>&1 || {
    failed=1
    say "torch $1 FAILED:"
    tail -20 "$log" | tee -a "$summary"
    return
  }
  grep -E "^RESULT|hash check|trained " "$log" | sed "s/^RESULT ctr_torch/RESULT torch name=$1 cpus=$2 wall_s=$((SECONDS - s))/" |
    tee -a "$summary"
}

say
say "## 200k set (configs/ctr_wide_deep.json: batch 256, 2 epochs, async)"
job_config "$work/ctr200k.json" "$data200k"
say
say "### cores 0-1 (psflow: every process; PyTorch: 2 threads)"
if [ "$mode" = all ]; then
  run_psflow 200k_2c 0-1 "$work/ctr200k.json"
  run_torch 200k_2c 0-1 2 "$data200k" "$work/ctr200k.json"
  if [ $((SECONDS - t0)) -lt $((budget - 200)) ]; then
    # PyTorch's default OpenMP wait policy (the script's PASSIVE was chosen
    # for Debian's OpenBLAS build, which took 21x longer with ACTIVE on the
    # 2-core VM: hence the limit).
    run_torch 200k_2c_active 0-1 2 "$data200k" "$work/ctr200k.json" 90 OMP_WAIT_POLICY=ACTIVE
  fi
fi
[ -n "$blas_env" ] && run_psflow 200k_2c_blas 0-1 "$work/ctr200k.json" "$blas_env"
if [ "$mode" = blas2c ]; then
  run_torch 200k_2c_active 0-1 2 "$data200k" "$work/ctr200k.json" 90 OMP_WAIT_POLICY=ACTIVE
  run_psflow 200k_2c 0-1 "$work/ctr200k.json"
fi

if [ "$mode" = all ]; then
  wait "$tests_pid"
  say
  say "## GPU tests (PSFLOW_REQUIRE_GPU=1, cores $test_cores, beside the 2-core runs)"
  say
  cat "$work/gpu_tests.md" | tee -a "$summary"
  grep -q FAILED "$work/gpu_tests.md" && failed=1
fi

if [ "$wide" = 1 ] && [ "$mode" != blas2c ]; then
  say
  say "### cores $wide_cpus (PyTorch: $wide_threads threads)"
  [ "$mode" = all ] && run_psflow 200k_wide "$wide_cpus" "$work/ctr200k.json"
  [ -n "$blas_env" ] && run_psflow 200k_wide_blas "$wide_cpus" "$work/ctr200k.json" "$blas_env"
  [ "$mode" = all ] && run_torch 200k_wide "$wide_cpus" "$wide_threads" "$data200k" \
    "$work/ctr200k.json" "$(left)"
  run_torch 200k_wide_active "$wide_cpus" "$wide_threads" "$data200k" "$work/ctr200k.json" \
    90 OMP_WAIT_POLICY=ACTIVE
fi

if [ "$mode" = all ] && [ "$wide" = 1 ] && [ $((SECONDS - t0)) -lt $((budget - 150)) ]; then
  data2m=/tmp/psflow-data/ctr_big_$big_train
  say
  say "## $big_train-example set (ctr_accuracy.py's sizes: batch 512, 1 epoch here), cores $wide_cpus"
  say '```'
  gen "$data2m" "$big_train" "$big_test"
  say '```'
  job_config "$work/ctr2m.json" "$data2m" training.batch_size=512 training.epochs=1 \
    evaluation.every_secs=60
  run_psflow big_wide "$wide_cpus" "$work/ctr2m.json" "$blas_env"
  if [ $((SECONDS - t0)) -lt $((budget - 130)) ]; then
    run_torch big_wide "$wide_cpus" "$wide_threads" "$data2m" "$work/ctr2m.json" "$(left)"
  else
    say "(PyTorch on the $big_train set skipped: $((SECONDS - t0)) s spent of $budget)"
  fi
elif [ "$mode" = all ]; then
  say
  say "(the $big_train set skipped: $((SECONDS - t0)) s spent of $budget)"
fi

say
say "total $((SECONDS - t0)) s"
# A few logs back (at most 8 files come back in all).
(cd "$work" && tar -czf "$out/logs.tgz" *.log cpu_*.txt job_*/*.log) 2>/dev/null || true
exit "$failed"
