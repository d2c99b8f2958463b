#!/usr/bin/env bash
# Machine checks of concurrency and memory safety (docs/testing.md):
#   1. the whole tree under clang 14 with -Werror=thread-safety, which
#      checks every ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED;
#   2. every unit test under AddressSanitizer + UndefinedBehaviorSanitizer
#      (the multi-process tests in tests/ and the bundle test run in the
#      normal build only);
#   3. every unit test under ThreadSanitizer, except the five whose
#      threads meet only inside gRPC (tag no_tsan; docs/testing.md);
#   (2 and 3 build the tests and what they run only, --build_tests_only:
#   the benchmarks and tools stay out of the sanitizer builds, which are
#   most of a CI run's time on a cold cache; step 1 still compiles them)
#   4. the whole-job tests tagged sanitizer_job (diverging jobs in every
#      mode) with ASan/UBSan-built role binaries.
# Installs what it needs (tools/setup.sh). Extra arguments go to both
# bazel commands.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/setup.sh
t=$(date +%s)
bazel build --config=clang "$@" -- //...
echo "sanitizers: clang thread-safety build $(( $(date +%s) - t ))s"
t=$(date +%s)
bazel test --config=asan --build_tests_only "$@" -- //... -//tests/... -//deploy/...
echo "sanitizers: ASan/UBSan unit tests $(( $(date +%s) - t ))s"
t=$(date +%s)
bazel test --config=tsan --build_tests_only "$@" -- //... -//tests/... -//deploy/...
echo "sanitizers: TSan unit tests $(( $(date +%s) - t ))s"
# Whole jobs down their failure paths with ASan/UBSan-built role binaries
# (tag sanitizer_job; the full set is tools/sanitizer_jobs.sh).
t=$(date +%s)
bazel test --config=asan --test_tag_filters=sanitizer_job --build_tests_only "$@" \
  -- //tests/...
echo "sanitizers: ASan/UBSan whole jobs $(( $(date +%s) - t ))s"
