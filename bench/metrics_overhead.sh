#!/usr/bin/env bash
# What Prometheus metrics cost the default job: runs it (psctl local, the
# embedded default config) alternately without and with --metrics, the
# latter scraped every second by curl on every task (as a Prometheus with a
# 1 s interval would), and prints each run's training time from result.json.
#
#   bazel build --config=opt //client/psctl:psctl //ps:ps_server //worker \
#       //chief //evaluator
#   bash bench/metrics_overhead.sh [bin_dir=bazel-bin] [pairs=3]
set -euo pipefail
BIN=${1:-bazel-bin}
PAIRS=${2:-3}
DIR=$(mktemp -d /tmp/metrics_overhead.XXXXXX)
trap 'rm -rf "$DIR"' EXIT

run() {  # run <label> [--metrics]
  local label=$1; shift
  local out="$DIR/run"
  "$BIN/client/psctl/psctl" local --bin_dir="$BIN" --dir="$out" \
      --device=cpu "$@" >"$DIR/log" 2>&1 &
  local psctl=$!
  local scraper=""
  if [ "${1:-}" = --metrics ]; then
    (
      while [ ! -f "$out/prometheus_targets.json" ]; do sleep 0.1; done
      targets=$(grep -o '127.0.0.1:[0-9]*' "$out/prometheus_targets.json")
      while true; do
        for t in $targets; do curl -s -o /dev/null "http://$t/metrics" || true; done
        sleep 1
      done
    ) &
    scraper=$!
  fi
  wait "$psctl"
  [ -n "$scraper" ] && kill "$scraper" 2>/dev/null || true
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("%-12s training %.2f s, test accuracy %.4f" % (sys.argv[2], r["training_seconds"], r["test_accuracy"]))' \
      "$out/result.json" "$label"
}

for i in $(seq "$PAIRS"); do
  run "off"
  run "on+scraped" --metrics
done
