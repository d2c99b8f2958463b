#!/usr/bin/env bash
# Runs the real psctl binary the way operators do: TF_CONFIG from the
# environment, --tf_config with inline JSON or a file; checks exit codes and
# what is printed.
set -euo pipefail

PSCTL="$1"
fail() { echo "FAIL: $*" >&2; exit 1; }

KUBEFLOW='{"cluster":{"evaluator":["j-evaluator-0.ns.svc:2222"],"ps":["j-ps-0.ns.svc:2222"],"worker":["j-worker-0.ns.svc:2222"]},"task":{"type":"worker","index":0},"environment":"cloud"}'

# Valid, from the environment.
out=$(TF_CONFIG="$KUBEFLOW" "$PSCTL" tfconfig check) || fail "valid env config exited $?"
grep -q "from the TF_CONFIG environment variable is valid" <<<"$out" || fail "no source line: $out"
grep -q "acts as chief: yes" <<<"$out" || fail "worker 0 not chief: $out"
grep -q "j-ps-0.ns.svc:2222" <<<"$out" || fail "peer missing: $out"

# Valid, from a file given by flag; the flag wins over the environment.
file="$TEST_TMPDIR/tf_config.json"
printf '%s' '{"cluster":{"ps":["p:1"],"worker":["w:1"]},"task":{"type":"ps","index":0}}' >"$file"
out=$(TF_CONFIG="$KUBEFLOW" "$PSCTL" tfconfig check --tf_config="$file") || fail "file config exited $?"
grep -q "task:          ps 0 at p:1" <<<"$out" || fail "flag did not win: $out"

# Invalid: exits 1 and names the problem on stderr.
set +e
err=$(TF_CONFIG='{"cluster":{"ps":["p:1"],"worker":["w:1"]},"task":{"type":"worker","index":5}}' \
  "$PSCTL" tfconfig check 2>&1 >/dev/null)
code=$?
set -e
[ "$code" -eq 1 ] || fail "invalid config exited $code, want 1"
grep -q 'task.index 5 is out of range for job "worker" (1 task); use 0..0' <<<"$err" || fail "message: $err"

# Nothing set.
set +e
err=$(env -u TF_CONFIG "$PSCTL" tfconfig check 2>&1 >/dev/null)
code=$?
set -e
[ "$code" -eq 1 ] || fail "unset TF_CONFIG exited $code, want 1"
grep -q "TF_CONFIG is not set" <<<"$err" || fail "message: $err"

# Unknown command: usage error.
set +e
"$PSCTL" tfconfig frobnicate >/dev/null 2>&1
code=$?
set -e
[ "$code" -eq 2 ] || fail "unknown command exited $code, want 2"

echo PASS
