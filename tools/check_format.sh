#!/usr/bin/env bash
# Fails when a C++ or CUDA source is not clang-formatted (.clang-format).
# Fix with: clang-format -i <files>
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v clang-format >/dev/null 2>&1; then
  echo "check_format: clang-format is missing; run tools/setup.sh" >&2
  exit 1
fi
bad=()
while IFS= read -r f; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done < <(git ls-files '*.h' '*.cc' '*.cu' '*.cuh')
if [ ${#bad[@]} -gt 0 ]; then
  echo "check_format: not clang-formatted (run clang-format -i on them):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check_format: all sources formatted"
