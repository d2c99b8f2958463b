#!/usr/bin/env bash
# Runs the real psctl the way operators do: `psctl config check` on every
# shipped job config (//configs:job_configs, so a new config is checked as
# soon as it is added) must print OK; a shipped config made wrong must fail
# naming the problem. The Fashion-MNIST configs read Debian's
# dataset-fashion-mnist (tools/setup.sh installs it).
set -euo pipefail

PSCTL="$1"
shift
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$#" -ge 3 ] || fail "expected every config in configs/, got $# files: $*"

# psctl local generates the CTR configs' data under /tmp/psflow-data; here
# a place of this test's own per config, so what an earlier run or config
# left there counts for nothing.
data="$TEST_TMPDIR/psflow-data"

for config in "$@"; do
  name=$(basename "$config" .json)
  copy="$TEST_TMPDIR/$name.json"
  sed "s#/tmp/psflow-data#$data/$name#g" "$config" >"$copy"
  out=$("$PSCTL" config check "$copy" 2>&1) ||
    fail "$name: psctl config check exited $?: $out"
  grep -q "^OK: $name: model " <<<"$out" || fail "$name: no OK line: $out"
  grep -q "^memory: each worker needs about" <<<"$out" ||
    fail "$name: no memory line: $out"
  if grep -q '"synthesize"' "$copy"; then
    grep -q "does not exist yet: psctl local generates it" <<<"$out" ||
      fail "$name: no word of the data to generate: $out"
    # A synthetic set there made with other settings (smaller than the
    # config asks) is stale: refused, naming both.
    dir=$(sed -n 's#.*"train_path": "\(.*\)/train.txt".*#\1#p' "$copy")
    [ -n "$dir" ] || fail "$name: no train_path <dir>/train.txt"
    "$PSCTL" data synth-ctr --out_dir="$dir" --train_examples=3000 \
      --test_examples=1000 --vocabulary=10000 >/dev/null ||
      fail "$name: psctl data synth-ctr exited $?"
    if out=$("$PSCTL" config check "$copy" 2>&1); then
      fail "$name: a stale synthetic set passed: $out"
    fi
    grep -q "made with other settings" <<<"$out" ||
      fail "$name: stale set not named: $out"
    # Without planted.json the files are the user's own: read and counted.
    rm "$dir/planted.json"
    out=$("$PSCTL" config check "$copy" 2>&1) ||
      fail "$name: psctl config check on generated data exited $?: $out"
    grep -q "data: 3000 training examples of 13 integer and 26 categorical columns, 1000 test examples$" <<<"$out" ||
      fail "$name: generated data not counted: $out"
  fi
done

# Runs psctl config check on the default job with `sed` program $1 applied;
# leaves the exit status in $code and stderr in $err.
check_edited() {
  sed "$1" "$default" >"$TEST_TMPDIR/edited.json"
  set +e
  err=$("$PSCTL" config check "$TEST_TMPDIR/edited.json" 2>&1 >/dev/null)
  code=$?
  set -e
}
default=""
for config in "$@"; do
  case "$config" in *fashion_mnist_mlp.json) default="$config" ;; esac
done
[ -n "$default" ] || fail "fashion_mnist_mlp.json is not among $*"

# Labels of the other split.
check_edited 's#"train_labels": "\([^"]*\)/train-labels#"train_labels": "\1/t10k-labels#'
[ "$code" -eq 1 ] || fail "other split's labels exited $code, want 1"
grep -q "train-images-idx3-ubyte.gz holds 60000 examples but .*t10k-labels-idx1-ubyte.gz holds 10000 labels; they must come from the same split" <<<"$err" ||
  fail "other split's labels: $err"

# A model too large for the memory the job declares.
check_edited 's#"mode": "ASYNC",#"mode": "ASYNC", "worker_memory_mib": 200,#'
[ "$code" -eq 1 ] || fail "200 MiB workers exited $code, want 1"
grep -q "more than the 200 MiB each worker has (training.worker_memory_mib)" <<<"$err" ||
  fail "200 MiB workers: $err"

# An unknown field, and a key given twice.
check_edited 's#"epochs": 12#"epoch": 12#'
[ "$code" -eq 1 ] || fail "unknown field exited $code, want 1"
grep -q "epoch" <<<"$err" || fail "unknown field: $err"
check_edited 's#"epochs": 12#"epochs": 12, "epochs": 13#'
[ "$code" -eq 1 ] || fail "duplicate key exited $code, want 1"
grep -q 'duplicate key "epochs"' <<<"$err" || fail "duplicate key: $err"

# Usage: the config is required.
set +e
"$PSCTL" config check >/dev/null 2>&1
code=$?
set -e
[ "$code" -eq 2 ] || fail "no config exited $code, want 2"

echo PASS
