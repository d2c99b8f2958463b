#!/usr/bin/env bash
# The layering check passes a tree that keeps the layers and fails, naming
# file and line, on each kind of wrong include.
set -euo pipefail
check="$1"
root="${TEST_TMPDIR:-$(mktemp -d)}/tree"

write() {  # write <path> <included header>...
  local path="$root/$1"
  shift
  mkdir -p "$(dirname "$path")"
  : >"$path"
  for header in "$@"; do echo "#include \"$header\"" >>"$path"; done
}

reset_tree() {
  rm -rf "$root"
  write common/status.h
  write proto/protocol.h common/status.h
  write ps/ps_core.cc proto/protocol.h common/status.h
  write client/ps_client.cc ps/ps_core.h common/job/placement.h
  write model/mlp.cc model/device/device.h common/job/logical_variable.h
  write worker/worker_main.cc chief/chief_runner.h model/registry.h
  write checkpoint/checkpoint_test.cc client/ps_client.h
}

expect_clean() {
  if ! python3 "$check" "$root" >/dev/null; then
    echo "FAIL: a tree that keeps the layers was rejected:" >&2
    python3 "$check" "$root" >&2 || true
    exit 1
  fi
}

expect_violation() {  # expect_violation <file:line pattern>
  local out
  if out="$(python3 "$check" "$root")"; then
    echo "FAIL: no violation reported; expected $1" >&2
    exit 1
  fi
  grep -q "$1" <<<"$out" || {
    echo "FAIL: expected a report naming $1, got:" >&2
    echo "$out" >&2
    exit 1
  }
}

reset_tree
expect_clean

# abseil's mutex directly, which TSan cannot see.
reset_tree
write ps/ps_core.cc proto/protocol.h absl/synchronization/mutex.h
expect_violation 'ps/ps_core.cc:2: includes "absl/synchronization/mutex.h"'

# A lower layer including a higher one.
reset_tree
write ps/ps_core.cc proto/protocol.h client/ps_client.h
expect_violation 'ps/ps_core.cc:2: includes "client/ps_client.h"'

# The model library reaching up into a role.
reset_tree
write model/mlp.cc worker/trainer.h
expect_violation 'model/mlp.cc:1: includes "worker/trainer.h"'

# A role including another role's internals (also from a test).
reset_tree
write evaluator/evaluator_runner.cc worker/trainer.h
expect_violation 'evaluator/evaluator_runner.cc:1'
reset_tree
write worker/worker_main.cc chief/recovery.h
expect_violation 'worker/worker_main.cc:1'
reset_tree
write client/ps_client_test.cc chief/recovery.h
expect_violation 'client/ps_client_test.cc:1'

# Sideways between two folders on one floor.
reset_tree
write data/dataset.cc model/device/device.h
expect_violation 'data/dataset.cc:1'

echo "PASS"
