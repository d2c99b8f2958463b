#!/usr/bin/env bash
# The soak run of issue 37: every whole-job test that drives a failure path
# (diverging updates, lost and restarted servers, restores, shutdown while
# calls are in flight, the fault-injection smoke trials) with role binaries
# built with AddressSanitizer + UndefinedBehaviorSanitizer. A sanitizer
# report aborts the process it happens in, and each test fails on a task
# killed by a signal or a job that does not end as it should.
# CI runs the tagged subset (tools/sanitizers.sh); this runs all of them,
# one test at a time (about 8 minutes on 2 cores). Results: docs/testing.md.
#
#   bash tools/sanitizer_jobs.sh [extra bazel flags]
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bazel test --config=asan --test_tag_filters= --test_timeout=3600 \
  --local_test_jobs=1 "$@" -- \
  //tests:divergence_test //tests:recovery_test //tests:training_test \
  //tests:fault_injection_smoke //tests:checkpoint_cluster_test \
  //tests:ps_cluster_test
