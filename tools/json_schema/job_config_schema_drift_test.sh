#!/usr/bin/env bash
# The checked-in configs/job_config.schema.json must be what
# proto/job_config.proto gives now: editors read the checked-in one.
set -euo pipefail

generated="$1"
checked_in="$2"
if ! cmp -s "$generated" "$checked_in"; then
  diff -u "$checked_in" "$generated" | head -n 80 >&2 || true
  echo "FAIL: configs/job_config.schema.json is out of date with" \
    "proto/job_config.proto (the diff above turns the checked-in file into" \
    "the generated one). Regenerate it with" \
    "\`bazel run //tools/json_schema:update_job_config_schema\` and commit" \
    "it." >&2
  exit 1
fi
echo PASS
