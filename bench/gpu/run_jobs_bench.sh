#!/usr/bin/env bash
# The short GPU-host run of issue 35's first step (flush-to-zero on every
# compute thread): the GPU tests, then the whole jobs whose workers waited
# on the parameter servers (bench/RESULTS.md, "Whole jobs on the GPU host"),
# from a bundle made by make_bundle.sh:
#
#   1. every GPU test binary with PSFLOW_REQUIRE_GPU=1;
#   2. psctl local, 2 workers sharing the GPU, an evaluator, async: the
#      Fashion-MNIST MLP (3 epochs) on cuda and on cpu with 1 parameter
#      server, and the CTR wide-and-deep job (configs/ctr_wide_deep.json)
#      on cuda with 2; each worker's finished line (examples/s, and the
#      share of a step spent computing, waiting on pulls and on pushes).
#
#   bash bench/gpu/run_jobs_bench.sh gpu_bundle[.tar.xz] [data_dir] [out_dir]
#
# data_dir holds the four Fashion-MNIST .gz files (copied to the path the job
# configs name when that is missing). Writes logs and jobs_summary.md to
# out_dir (default: $OUT when set, else ./gpu_bench_out).
#
# Settings from the environment (run_device_check.sh uses them):
#   PSFLOW_SKIP_GPU_TESTS=1  skip step 1 (a caller that ran them itself);
#   PSFLOW_JOB_TIMEOUT=<s>   stop a job (psctl and its processes) after that
#                            long; it then counts as failed (default: none);
#   PSFLOW_ZOO_JOBS="ctr_dlrm ..."  also run these configs/<name>.json jobs
#                            with 2 parameter servers (the GPU's device);
#   PSFLOW_JOB_DEVICE=cpu    run the "cuda" jobs on the CPU backend instead
#                            (a dry run on a machine without a GPU).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$here/bundle_env.sh"
bundle="$(open_bundle "${1:?usage: run_jobs_bench.sh <bundle> [data_dir] [out_dir]}")" || exit 1
data="${2:-}"
out="${3:-${OUT:-gpu_bench_out}}"
mkdir -p "$out/tests"
out="$(cd "$out" && pwd)"
summary="$out/jobs_summary.md"
: >"$summary"
say() { echo "$@" | tee -a "$summary"; }
failed=0
use_bundle_libraries "$bundle" >"$out/libraries.log" 2>&1 || {
  cat "$out/libraries.log"
  exit 1
}
fmnist=/usr/share/datasets/fashion-mnist
if [ ! -e "$fmnist/train-images-idx3-ubyte.gz" ] && [ -n "$data" ]; then
  # Where that cannot be written, the job configs read data_dir instead.
  { mkdir -p "$fmnist" && cp "$data"/*.gz "$fmnist/"; } 2>/dev/null ||
    fmnist="$(cd "$data" && pwd)"
fi

say "# psflow GPU jobs run ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
say
say '```'
head -3 "$bundle/MANIFEST" | tee -a "$summary"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee -a "$summary"
echo "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(uname -srm)" |
  tee -a "$summary"
say '```'

if [ "${PSFLOW_SKIP_GPU_TESTS:-0}" != 1 ]; then
  say
  say "## GPU tests (PSFLOW_REQUIRE_GPU=1)"
  say
  run_gpu_tests "$bundle" "$out/tests" || failed=1
fi
gpu="${PSFLOW_JOB_DEVICE:-cuda}"
tag=cuda  # in the jobs' names
[ "$gpu" = cuda ] || tag="cuda_as_$gpu"

cd "$bundle/bin" || exit 1
run_job() {  # <name> <config> <device> <ps>
  local dir="$out/job_$1"
  rm -rf "$dir"
  local start end rc limit=()
  [ -n "${PSFLOW_JOB_TIMEOUT:-}" ] && limit=(timeout --kill-after=10 "$PSFLOW_JOB_TIMEOUT")
  start=$(date +%s.%N)
  ${limit[@]+"${limit[@]}"} "$bundle/bin/client/psctl/psctl" local --job="$2" --ps="$4" --workers=2 --evaluator \
    --device="$3" --dir="$dir" --bin_dir="$bundle/bin" \
    --checkpoint_dir="$dir/checkpoints" >"$dir.log" 2>&1
  rc=$?
  [ "$rc" = 0 ] || failed=1
  end=$(date +%s.%N)
  local note=""
  [ "$rc" = 0 ] || note=", FAILED (exit $rc)"
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && note=", TIMED OUT after ${PSFLOW_JOB_TIMEOUT} s"
  say "### $1: --device=$3 --ps=$4 --workers=2 ($(python3 -c "print('%.1f' % ($end - $start))") s wall$note)"
  say '```'
  tail -3 "$dir.log" | tee -a "$summary"
  grep -h "finished:" "$dir"/worker*.log 2>/dev/null | sed 's/^.*finished:/finished:/' |
    tee -a "$summary"
  say '```'
}
say
say "## Whole jobs: psctl local, 2 workers sharing the GPU"
say
short_config "$repo/configs/fashion_mnist_mlp.json" 3 "$out/mlp_3_epochs.json" "$fmnist"
run_job "mlp_${tag}_1ps" "$out/mlp_3_epochs.json" "$gpu" 1
run_job mlp_cpu_1ps "$out/mlp_3_epochs.json" cpu 1
# The CTR job writes its generated data under /tmp/psflow-data on first use.
run_job "ctr_${tag}_2ps" "$repo/configs/ctr_wide_deep.json" "$gpu" 2
for zoo in ${PSFLOW_ZOO_JOBS:-}; do
  run_job "${zoo}_${tag}_2ps" "$repo/configs/$zoo.json" "$gpu" 2
done
say
say "Logs: $out"
exit "$failed"
