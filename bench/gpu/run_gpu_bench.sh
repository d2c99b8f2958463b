#!/usr/bin/env bash
# Runs issue 6's GPU checks and measurements on a GPU machine, from a
# bundle made by make_bundle.sh on the build machine:
#
#   1. the GPU tests (skips turned into failures: PSFLOW_REQUIRE_GPU=1),
#   2. gemm_bench: our Gemm against cuBLAS float32 and TF32 peaks,
#   3. step_bench (psflow, CUDA backend) and torch_step_bench.py (PyTorch
#      eager) on the same GPU, model, batch and step, in float32 and TF32,
#      for the default MLP (784-256-10, batch 64) and the large one
#      (784-4096-4096-10, batch 1024),
#   4. the Keras guide convnet (configs/fashion_mnist_convnet.json, batch
#      64): convnet_bench --device=cuda against bench/convnet_torch.py
#      speed --device=cuda, alternately (bench/convnet_bench.py), with
#      psflow's per-layer table on the GPU.
#
#   bash bench/gpu/run_gpu_bench.sh gpu_bundle[.tar.xz] [out_dir]
#
# Needs: an NVIDIA driver for CUDA 13 (>= 580), libcublas.so.13 and
# libcublasLt.so.13 (a CUDA 13 toolkit, or PyTorch's nvidia-cublas wheel),
# glibc >= 2.34, python3 with PyTorch for the comparison. Writes logs and
# summary.md to out_dir (default: $OUT when set, else ./gpu_bench_out).
# Exits 1 when a test fails or a binary cannot load.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/bundle_env.sh"
bundle="$(open_bundle "${1:?usage: run_gpu_bench.sh <bundle dir or .tar.xz> [out dir]}")" || exit 1
out="${2:-${OUT:-gpu_bench_out}}"
mkdir -p "$out/tests"
out="$(cd "$out" && pwd)"
summary="$out/summary.md"
: >"$summary"
say() { echo "$@" | tee -a "$summary"; }
failed=0

say "# psflow GPU run ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
say
say '```'
cat "$bundle/MANIFEST" | tee -a "$summary"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
  --format=csv 2>&1 | tee -a "$summary"
echo "host: $(nproc) cores, $(uname -srm)" | tee -a "$summary"
say '```'

# --- Libraries: bundle first, then wherever this machine keeps cuBLAS 13.
say
use_bundle_libraries "$bundle" >"$out/libraries.log" 2>&1
loadable=$?
tee -a "$summary" <"$out/libraries.log"
[ "$loadable" = 0 ] || exit 1

# --- 1. Tests.
say
say "## Tests (PSFLOW_REQUIRE_GPU=1)"
say
run_gpu_tests "$bundle" "$out/tests" || failed=1

# --- 2. GEMM.
say
"$bundle/bin/gemm_bench" >"$out/gemm_bench.log" 2>&1 || failed=1
grep -v '^RESULT' "$out/gemm_bench.log" | tee -a "$summary"

# --- 3. Step throughput, psflow vs PyTorch eager.
rate() { sed -n 's/.*examples_per_sec=\([0-9.]*\).*/\1/p' "$1" | tail -1; }
say
say "## Step throughput (examples/s; forward + backward + gradient download, no PS)"
say
say "| model | math | psflow (CUDA) | PyTorch eager | psflow / PyTorch |"
say "|---|---|---:|---:|---:|"
for model in default large; do
  for math in fp32 tf32; do
    ours_log="$out/step_bench_${model}_${math}.log"
    torch_log="$out/torch_step_bench_${model}_${math}.log"
    tf32_flag=""
    torch_flag=""
    if [ "$math" = tf32 ]; then
      tf32_flag="--allow_tf32"
      torch_flag="--tf32"
    fi
    "$bundle/bin/step_bench" --device=cuda --model="$model" $tf32_flag \
      >"$ours_log" 2>&1 || failed=1
    python3 "$here/torch_step_bench.py" --model="$model" $torch_flag \
      >"$torch_log" 2>&1
    ours="$(rate "$ours_log")"
    theirs="$(rate "$torch_log")"
    ratio="n/a"
    if [ -n "$ours" ] && [ -n "$theirs" ]; then
      ratio="$(python3 -c "print('%.2fx' % ($ours / $theirs))")"
    fi
    say "| $model | $math | ${ours:-failed} | ${theirs:-failed} | $ratio |"
  done
done
say
say "## Convnet (Keras guide model, batch 64): forward + backward per example"
say
say '```'
python3 "$here/../convnet_bench.py" --device=cuda --pairs=3 \
  --bench="$bundle/bin/convnet_bench" --python=python3 \
  >"$out/convnet_bench.log" 2>&1 || failed=1
tee -a "$summary" <"$out/convnet_bench.log"
say '```'
say
say "CPU backend on this host for reference (1 and $(nproc) OpenBLAS threads):"
for threads in 1 "$(nproc)"; do
  "$bundle/bin/step_bench" --device=cpu --model=default --cpu_threads="$threads" \
    2>&1 | grep '^RESULT' | tee -a "$summary"
done
say
say "Logs: $out"
exit "$failed"
