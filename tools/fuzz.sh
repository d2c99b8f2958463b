#!/usr/bin/env bash
# Builds every fuzz harness with libFuzzer, ASan and UBSan (--config=fuzz)
# and runs each for PSFLOW_FUZZ_SECONDS seconds (default 10; CI runs the
# default, a longer run is e.g. PSFLOW_FUZZ_SECONDS=3600) on a copy of its
# seed corpus. A crash or sanitizer report fails the run and leaves the
# input in $PSFLOW_FUZZ_DIR/<name>-artifacts/ (add it to fuzz/corpus/<name>/
# once fixed, so `bazel test //fuzz:all` replays it forever).
#   bash tools/fuzz.sh [harness names...]   (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${PSFLOW_FUZZ_SECONDS:-10}"
work="${PSFLOW_FUZZ_DIR:-$(mktemp -d /tmp/psflow-fuzz.XXXXXX)}"
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  names=($(ls fuzz/corpus))
fi
bazel build --config=fuzz $(printf '//fuzz:%s_fuzzer ' "${names[@]}")
bin="$(bazel info --config=fuzz bazel-bin)/fuzz"
for name in "${names[@]}"; do
  corpus="$work/$name-corpus"
  artifacts="$work/$name-artifacts"
  mkdir -p "$corpus" "$artifacts"
  cp fuzz/corpus/"$name"/* "$corpus"/
  echo "fuzzing $name for ${seconds}s"
  # -rss_limit_mb: a parser that reserves what a small input claims fails.
  if ! "$bin/${name}_fuzzer" "$corpus" -max_total_time="$seconds" \
      -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 \
      -artifact_prefix="$artifacts/" -print_final_stats=1 \
      > "$work/$name.log" 2>&1; then
    tail -40 "$work/$name.log" >&2
    echo "FAIL: fuzz/$name: a crash, leak, hang or sanitizer report; the" \
      "input is in $artifacts/" >&2
    exit 1
  fi
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" \
    "$work/$name.log" | tr '\n' ' ' || true
  echo
done
echo "fuzz: ${#names[@]} harnesses, ${seconds}s each, clean"
