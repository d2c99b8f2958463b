#!/usr/bin/env bash
# A role binary on a CPU whose model OpenBLAS does not recognize (faked
# with an LD_PRELOAD shim that reports the generic Prescott kernels) starts
# itself again once with better kernels (model/device/cpu/blas_kernels.h),
# and keeps a choice the user made. Skipped on a CPU without AVX2.
set -euo pipefail
worker=$1
shim=$(realpath "$2")
if ! grep -q -w avx2 /proc/cpuinfo; then
  echo "SKIPPED: this CPU has no AVX2, so the generic kernels are right"
  exit 0
fi
# --helpshort prints the flags and exits (status 1, as abseil's help does).
out=$(LD_PRELOAD=$shim timeout 60 "$worker" --helpshort 2>&1 || true)
restarts=$(grep -c "starting again with OPENBLAS_CORETYPE=" <<<"$out" || true)
if [ "$restarts" != 1 ]; then
  echo "expected one restart with better kernels, got $restarts:"
  echo "$out"
  exit 1
fi
grep -q -- "--device" <<<"$out" || { echo "the restarted worker did not run: $out"; exit 1; }
# A choice the user made is kept: no restart.
out=$(OPENBLAS_CORETYPE=Prescott LD_PRELOAD=$shim timeout 60 "$worker" --helpshort 2>&1 || true)
if grep -q "starting again" <<<"$out"; then
  echo "restarted although OPENBLAS_CORETYPE was set: $out"
  exit 1
fi
# So is PSFLOW_KEEP_BLAS_KERNELS=1.
out=$(PSFLOW_KEEP_BLAS_KERNELS=1 LD_PRELOAD=$shim timeout 60 "$worker" --helpshort 2>&1 || true)
if grep -q "starting again" <<<"$out"; then
  echo "restarted although PSFLOW_KEEP_BLAS_KERNELS=1: $out"
  exit 1
fi
echo "PASSED"
