#!/usr/bin/env bash
# The chief refuses a timeout flag of 0 or less at startup, naming the flag,
# before it reads TF_CONFIG or the job: such a timeout would declare every
# worker or server lost at once.
#   chief_flags_test.sh <chief>
set -euo pipefail
chief=$1
for flag in startup_timeout_s heartbeat_timeout_s \
    worker_replacement_timeout_s ps_return_timeout_s; do
  for value in 0 -5; do
    status=0
    out=$(PSFLOW_KEEP_BLAS_KERNELS=1 "$chief" --job=/nonexistent.json \
      "--$flag=$value" 2>&1) || status=$?
    if [[ $status -ne 1 ]]; then
      echo "FAIL: chief --$flag=$value exited $status, not 1:" >&2
      echo "$out" >&2
      exit 1
    fi
    expected="--$flag=$value is"
    grep -qF -- "$expected" <<<"$out" && grep -qF -- \
      "use a positive number of seconds" <<<"$out" || {
      echo "FAIL: chief --$flag=$value does not say \"$expected ...; use a" \
        "positive number of seconds\":" >&2
      echo "$out" >&2
      exit 1
    }
    echo "ok: chief --$flag=$value"
  done
done
echo PASSED
