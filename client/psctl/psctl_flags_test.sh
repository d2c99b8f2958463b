#!/usr/bin/env bash
# Runs the real psctl binary: every subcommand takes only its own flags, a
# flag of another subcommand is a usage error (2) naming it, --help prints a
# subcommand's flags, and no or an unknown command prints the usage.
set -euo pipefail

PSCTL="$1"
fail() { echo "FAIL: $*" >&2; exit 1; }

# Runs psctl; leaves the exit status in $code and stderr in $err.
run() {
  set +e
  err=$("$PSCTL" "$@" 2>&1 >/dev/null)
  code=$?
  set -e
}

run
[ "$code" -eq 2 ] || fail "no arguments exited $code, want 2"
grep -q "psctl tfconfig gen --chief=HOST" <<<"$err" || fail "no usage: $err"

run frobnicate --ps=2
[ "$code" -eq 2 ] || fail "unknown command exited $code, want 2"
grep -q 'unknown command "frobnicate"' <<<"$err" || fail "message: $err"

# --ps is a host list for tfconfig gen, a count for config check, local and
# k8s render, and nothing for ckpt verify.
out=$("$PSCTL" tfconfig gen --ps=10.0.0.2,10.0.0.3 --workers=10.0.0.4) ||
  fail "tfconfig gen exited $?"
grep -q '"ps": \["10.0.0.2:2222", "10.0.0.3:2222"\]' <<<"$out" || fail "gen: $out"
"$PSCTL" k8s render --image=x --ps=2 --workers=3 --evaluator=false >/dev/null ||
  fail "k8s render with counts exited $?"
run ckpt verify /nonexistent --ps=2
[ "$code" -eq 2 ] || fail "ckpt verify --ps exited $code, want 2"
grep -q "psctl ckpt verify: unknown flag --ps (a flag of psctl tfconfig gen, psctl config check, psctl k8s render and psctl local); psctl ckpt verify takes no flags" <<<"$err" ||
  fail "message: $err"

# A flag the subcommand has, but with a bad value.
run local --ps=two
[ "$code" -eq 2 ] || fail "local --ps=two exited $code, want 2"
grep -q "psctl local: --ps=two is not an integer" <<<"$err" || fail "message: $err"

# A straggler must name one of the job's workers, or rotate.
for bad in 5:4 1:0.5 rotate:4 rotate:4:0 x; do
  run local --workers=2 --straggler=$bad
  [ "$code" -eq 2 ] || fail "local --straggler=$bad exited $code, want 2"
  grep -q "psctl local: --straggler=$bad is not <worker>:<factor> (a worker in 0..1) or rotate:<factor>:<milliseconds>" <<<"$err" ||
    fail "message: $err"
done

# Missing argument.
run ckpt inspect --values
[ "$code" -eq 2 ] || fail "ckpt inspect without a checkpoint exited $code"
grep -q "psctl ckpt inspect: takes <dir>/ckpt-<step>; got 0 arguments" <<<"$err" ||
  fail "message: $err"

# Per-subcommand help, on stdout, exit 0.
out=$("$PSCTL" local --help) || fail "local --help exited $?"
grep -q -- "--timeout_s=INT (default 0)" <<<"$out" || fail "help: $out"
grep -q -- "--dir=STRING (default \"/tmp/psflow-local\")" <<<"$out" || fail "help: $out"
if grep -q -- "--image" <<<"$out"; then fail "local --help lists k8s flags"; fi
out=$("$PSCTL" ckpt list --help) || fail "ckpt list --help exited $?"
grep -q "psctl ckpt list takes no flags" <<<"$out" || fail "help: $out"

echo PASS
