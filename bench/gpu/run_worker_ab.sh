#!/usr/bin/env bash
# Two worker builds, alternately, on the same GPU host: the bundle's worker
# (A) and another worker binary (B, e.g. built from an earlier commit with
# `bazel build --config=opt //worker:worker`), each in whole jobs (psctl
# local, 2 workers sharing the GPU, an evaluator, async): the CTR
# wide-and-deep job on cuda with 2 parameter servers and the Fashion-MNIST
# MLP (3 epochs) on cuda with 1. Everything else (servers, chief,
# evaluator, psctl) is the bundle's, so the difference is the worker's.
#
#   bash bench/gpu/run_worker_ab.sh gpu_bundle.tar.xz <worker_b> <data_dir> [rounds] [out_dir]
#
# data_dir holds the four Fashion-MNIST .gz files. Writes ab_summary.md
# (each job's wall time and its workers' finished lines, round by round)
# and the logs to out_dir (default: $OUT when set, else ./worker_ab_out).
# Each job is stopped after AB_JOB_TIMEOUT_S (60) seconds; AB_DEVICE=cpu runs
# the "cuda" jobs on the CPU backend (a dry run without a GPU); AB_JOBS
# picks the jobs ("ctr mlp", the default, or either alone).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$here/bundle_env.sh"
usage="usage: run_worker_ab.sh <bundle> <worker_b> <data_dir> [rounds] [out_dir]"
bundle="$(open_bundle "${1:?$usage}")" || exit 1
worker_b="$(cd "$(dirname "${2:?$usage}")" && pwd)/$(basename "$2")"
data="$(cd "${3:?$usage}" && pwd)" || exit 1
rounds="${4:-3}"
out="${5:-${OUT:-worker_ab_out}}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
summary="$out/ab_summary.md"
: >"$summary"
say() { echo "$@" | tee -a "$summary"; }
case "$bundle" in
  /tmp/psflow_bundle_$$/*) trap 'rm -rf "/tmp/psflow_bundle_$$"' EXIT ;;
esac
use_bundle_libraries "$bundle" >"$out/libraries.log" 2>&1 || {
  cat "$out/libraries.log"
  exit 1
}
bin_a="$bundle/bin"
bin_b="$bundle/bin_b"
rm -rf "$bin_b"
cp -r "$bin_a" "$bin_b"
cp -f "$worker_b" "$bin_b/worker/worker"
chmod +x "$bin_b/worker/worker"

# The MLP's config, 3 epochs, its data read from data_dir.
short_config "$repo/configs/fashion_mnist_mlp.json" 3 "$out/mlp_3_epochs.json" "$data"

say "# Worker A/B on the GPU host ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
say
say '```'
head -3 "$bundle/MANIFEST" | tee -a "$summary"
say "A: the bundle's worker; B: $2 (md5 $(md5sum <"$worker_b" | cut -c1-12))"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee -a "$summary"
say "host: $(nproc) cores, $(uname -srm)"
say '```'
failed=0
run_job() {  # <side> <bin> <name> <config> <ps> <round>
  local dir="$out/$3_$1_$6"
  rm -rf "$dir"
  local start end rc
  start=$(date +%s.%N)
  timeout --kill-after=10 "${AB_JOB_TIMEOUT_S:-60}" "$2/client/psctl/psctl" local \
    --job="$4" --ps="$5" --workers=2 --evaluator --device="${AB_DEVICE:-cuda}" --dir="$dir" \
    --bin_dir="$2" --checkpoint_dir="$dir/checkpoints" >"$dir.log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  [ "$rc" = 0 ] || failed=1
  say "### round $6, $3, worker $1 ($(python3 -c "print('%.1f' % ($end - $start))") s wall, exit $rc, load $(cut -d' ' -f1 /proc/loadavg))"
  say '```'
  tail -1 "$dir.log" | tee -a "$summary"
  grep -h "finished:\|background thread" "$dir"/worker*.log 2>/dev/null |
    sed 's/^.*\(finished:\|background thread\)/\1/' | tee -a "$summary"
  # How stale the applied gradients were (each server's last line).
  grep -h "staleness of" "$dir"/ps-*.log 2>/dev/null |
    sed 's/^.*\(ps-[0-9]*\)\] /\1: /' | tee -a "$summary"
  say '```'
}
for round in $(seq 1 "$rounds"); do
  # Alternate which side goes first, so neither always runs on a cooler GPU.
  if [ $((round % 2)) = 1 ]; then sides="A B"; else sides="B A"; fi
  for job in ${AB_JOBS:-ctr mlp}; do
    for side in $sides; do
      bin="$bin_a"
      [ "$side" = B ] && bin="$bin_b"
      case "$job" in
        ctr) run_job "$side" "$bin" ctr "$repo/configs/ctr_wide_deep.json" 2 "$round" ;;
        mlp) run_job "$side" "$bin" mlp "$out/mlp_3_epochs.json" 1 "$round" ;;
        *) say "unknown job $job (AB_JOBS: ctr, mlp)"; exit 1 ;;
      esac
    done
  done
done
exit "$failed"
