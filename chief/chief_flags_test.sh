#!/usr/bin/env bash
# The chief refuses a timeout flag of 0 or less at startup, naming the flag,
# before it reads TF_CONFIG or the job: such a timeout would declare every
# worker or server lost at once; and a --result_file it could not write.
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

# A --result_file the chief could not write is refused at start, not after
# the whole run (its directory missing).
job="${TEST_TMPDIR:-/tmp}/job.json"
cat >"$job" <<'JSON'
{"model": {"mlp": {"hidden_sizes": [8]}}, "optimizer": {"kind": "SGD"},
 "learning_rate": {"learning_rate": 0.1},
 "data": {"train_images": "/nonexistent-images", "train_labels": "/nonexistent-labels"},
 "training": {"batch_size": 2, "steps": 10, "mode": "ASYNC"}}
JSON
status=0
out=$(TF_CONFIG='{"cluster": {"chief": ["127.0.0.1:0"], "ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}, "task": {"type": "chief", "index": 0}}' \
  PSFLOW_KEEP_BLAS_KERNELS=1 timeout 60 "$chief" --allow_unauthenticated_callers \
  --job="$job" --result_file=/nonexistent-dir/sub/result.json 2>&1) || status=$?
if [[ $status -ne 1 ]] || ! grep -qF -- \
    "--result_file=/nonexistent-dir/sub/result.json: its directory" <<<"$out"; then
  echo "FAIL: chief with an unwritable --result_file exited $status:" >&2
  echo "$out" >&2
  exit 1
fi
echo "ok: chief --result_file in a missing directory"
echo PASSED
