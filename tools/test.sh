#!/usr/bin/env bash
# The README's test command: installs what the build needs (Debian 12), then
# builds everything and runs the CI test subset (everything except tests
# tagged soak or requires_root; GPU tests skip themselves without a GPU).
# Extra arguments go to `bazel test`, e.g. `bash tools/test.sh //common/...`.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/setup.sh

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("//...")
bazel test --config=ci "${targets[@]}"
