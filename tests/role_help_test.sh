#!/usr/bin/env bash
# Every role binary answers --help with its usage line and every flag it
# takes, the security ones among them, and exits 0.
#   role_help_test.sh <ps_server> <chief> <worker> <evaluator>
set -euo pipefail
for binary in "$@"; do
  name=$(basename "$binary")
  out=$(PSFLOW_KEEP_BLAS_KERNELS=1 "$binary" --help 2>/dev/null) || {
    echo "FAIL: $name --help exited $?" >&2
    exit 1
  }
  for expected in "$name: " "psflow" "--tls_dir" "--token_dir" "--tls_ca" \
      "--transport_security" "--allow_unauthenticated_callers" "--bind_host" \
      "--tf_config"; do
    grep -qF -- "$expected" <<<"$out" || {
      echo "FAIL: $name --help does not mention $expected:" >&2
      echo "$out" >&2
      exit 1
    }
  done
  if grep -q "SetProgramUsageMessage" <<<"$out"; then
    echo "FAIL: $name --help says SetProgramUsageMessage() was never called" >&2
    exit 1
  fi
  echo "ok: $name --help"
done
echo PASSED
