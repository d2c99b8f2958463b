#!/usr/bin/env bash
# Runs issue 14's many-core and whole-job measurements on the GPU machine
# (16 cores), from a bundle made by make_bundle.sh:
#
#   1. ps_bench over TCP only (no shared memory): 1x1 and 2x2 at 4/40/400 MB
#      against loopback baselines from the same run;
#   2. trainer_bench --shared_memory=false at batch 64;
#   3. embedding_bench (1 and 2 servers);
#   4. whole jobs with psctl local --device=cuda: 2 GPU workers sharing the
#      one GPU with 1 and 2 parameter servers, and the same jobs on the CPU
#      backend; each worker's finished line (examples/s and the share of a
#      step spent computing, waiting on pulls and on pushes).
#
#   bash bench/gpu/run_host_bench.sh gpu_bundle[.tar.xz] [data_dir] [out_dir]
#
# data_dir holds the four Fashion-MNIST .gz files (copied to the path the job
# configs name when that is missing). Writes logs and host_summary.md to
# out_dir (default: $OUT when set, else ./gpu_bench_out).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$here/bundle_env.sh"
bundle="$(open_bundle "${1:?usage: run_host_bench.sh <bundle> [data_dir] [out_dir]}")" || exit 1
data="${2:-}"
out="${3:-${OUT:-gpu_bench_out}}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
summary="$out/host_summary.md"
: >"$summary"
say() { echo "$@" | tee -a "$summary"; }
failed=0
use_bundle_libraries "$bundle" >"$out/libraries.log" 2>&1 || {
  cat "$out/libraries.log"
  exit 1
}

fmnist=/usr/share/datasets/fashion-mnist
if [ ! -e "$fmnist/train-images-idx3-ubyte.gz" ] && [ -n "$data" ]; then
  mkdir -p "$fmnist" && cp "$data"/*.gz "$fmnist/"
fi

say "# psflow host run ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
say
say '```'
head -3 "$bundle/MANIFEST" | tee -a "$summary"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee -a "$summary"
echo "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(uname -srm)" |
  tee -a "$summary"
say '```'

cd "$bundle/bin" || exit 1
say
say "## ps_bench (TCP only)"
say
./bench/ps_bench --ps_server="$bundle/bin/ps/ps_server" >"$out/ps_bench.log" 2>&1 || failed=1
grep -v '^RESULT' "$out/ps_bench.log" | tee -a "$summary"

say
say "## trainer_bench --shared_memory=false (batch 64)"
say
./bench/trainer_bench --bin_dir="$bundle/bin" --shared_memory=false \
  >"$out/trainer_bench.log" 2>&1 || failed=1
grep -v '^RESULT' "$out/trainer_bench.log" | tail -30 | tee -a "$summary"

say
say "## embedding_bench"
say
./bench/embedding_bench --ps_server="$bundle/bin/ps/ps_server" \
  >"$out/embedding_bench.log" 2>&1 || failed=1
grep -v '^RESULT' "$out/embedding_bench.log" | tail -30 | tee -a "$summary"

say
run_job() {  # <name> <config> <device> <ps>
  local dir="$out/job_$1"
  rm -rf "$dir"
  local start end
  start=$(date +%s.%N)
  ./client/psctl/psctl local --job="$2" --ps="$4" --workers=2 --evaluator \
    --device="$3" --dir="$dir" --bin_dir="$bundle/bin" >"$dir.log" 2>&1 || failed=1
  end=$(date +%s.%N)
  say "### $1: --device=$3 --ps=$4 --workers=2 ($(python3 -c "print('%.1f' % ($end - $start))") s wall)"
  say '```'
  tail -3 "$dir.log" | tee -a "$summary"
  grep -h "finished:" "$dir"/worker*.log 2>/dev/null | sed 's/^.*finished:/finished:/' |
    tee -a "$summary"
  say '```'
}
short_config "$repo/configs/fashion_mnist_mlp.json" 3 "$out/mlp_3_epochs.json" "$fmnist"
short_config "$repo/configs/fashion_mnist_convnet.json" 1 "$out/convnet_1_epoch.json" "$fmnist"
say "## Whole jobs: psctl local, 2 workers sharing the GPU"
say
for device in cuda cpu; do
  for ps in 1 2; do
    run_job "mlp_${device}_${ps}ps" "$out/mlp_3_epochs.json" "$device" "$ps"
  done
done
run_job convnet_cuda_1ps "$out/convnet_1_epoch.json" cuda 1
say
say "Logs: $out"
exit "$failed"
