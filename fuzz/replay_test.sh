#!/usr/bin/env bash
# Replays a fuzz harness over its corpus (fuzz.bzl): every seed, and every
# input that once crashed a parser, must pass through it cleanly (no crash,
# no sanitizer report under --config=asan) and quietly: a rejected input
# may not flood stderr.
#   replay_test.sh <fuzzer> <corpus files...>
set -euo pipefail
fuzzer="$1"
shift
[ "$#" -gt 0 ] || { echo "FAIL: empty corpus" >&2; exit 1; }
err="${TEST_TMPDIR:-/tmp}/replay.stderr"
"$fuzzer" "$@" 2> "$err"
lines=$(wc -l < "$err")
if [ "$lines" -gt 0 ]; then
  echo "FAIL: the parsers wrote $lines lines to stderr for rejected input:" >&2
  head -5 "$err" >&2
  exit 1
fi
echo "PASS: $# inputs"
