#!/usr/bin/env bash
# Writes the job config's JSON Schema, generated from
# proto/job_config.proto, over configs/job_config.schema.json.
#
#   bazel run //tools/json_schema:update_job_config_schema
set -euo pipefail

if [ -z "${BUILD_WORKSPACE_DIRECTORY:-}" ]; then
  echo "run it with: bazel run //tools/json_schema:update_job_config_schema" >&2
  exit 2
fi
target="$BUILD_WORKSPACE_DIRECTORY/configs/job_config.schema.json"
cp "$1" "$target.tmp"
chmod 644 "$target.tmp"
mv "$target.tmp" "$target"
echo "wrote $target"
