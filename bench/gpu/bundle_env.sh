# Sourced by run_gpu_bench.sh and run_host_bench.sh: opens a bundle made by
# make_bundle.sh and points the dynamic loader at its libraries and at this
# machine's cuBLAS 13.

# Prints the bundle's folder; a .tar.xz is unpacked under /tmp first.
open_bundle() {
  local bundle="$1"
  if [ -f "$bundle" ]; then
    local dest="/tmp/psflow_bundle_$$"
    mkdir -p "$dest"
    # Python's tarfile, since an image may lack the xz program.
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
      "$bundle" "$dest" || return 1
    bundle="$dest/$(ls "$dest" | head -1)"
  fi
  (cd "$bundle" && pwd)
}

# Sets LD_LIBRARY_PATH; says (through `say` when defined) what it chose, and
# returns 1 when a binary still cannot load.
use_bundle_libraries() {
  local bundle="$1" lib_path="$1/lib" dir
  for dir in "${CUDA_HOME:-}/lib64" "${CUDA_PATH:-}/lib64" /usr/local/cuda/lib64 \
    /usr/local/cuda-13*/lib64 /usr/local/cuda-13*/targets/x86_64-linux/lib \
    /usr/lib/x86_64-linux-gnu; do
    if [ -e "$dir/libcublas.so.13" ]; then
      lib_path="$lib_path:$dir"
      break
    fi
  done
  if ! echo "$lib_path" | grep -q ":"; then
    # PyTorch's CUDA 13 wheels ship cuBLAS as nvidia-cublas.
    local torch_cublas
    torch_cublas="$(python3 - <<'PY' 2>/dev/null
import glob, os, site
for root in site.getsitepackages() + [site.getusersitepackages()]:
    for hit in glob.glob(os.path.join(root, "nvidia", "**", "libcublas.so.13"),
                         recursive=True):
        print(os.path.dirname(hit)); raise SystemExit
PY
)"
    [ -n "$torch_cublas" ] && lib_path="$lib_path:$torch_cublas"
  fi
  export LD_LIBRARY_PATH="$lib_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  if [ -d "$bundle/lib-fallback" ] &&
    ldd "$bundle/bin/step_bench" 2>&1 | grep -q "GLIBCXX\|CXXABI\|GCC_"; then
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$bundle/lib-fallback"
    echo "using the bundle's libstdc++ (this machine's is older)"
  fi
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  local binary ok=0
  while read -r binary; do
    if ldd "$binary" 2>&1 | grep -q "not found"; then
      echo "cannot load $binary:"
      ldd "$binary" 2>&1 | grep "not found"
      ok=1
    fi
  done < <(find "$bundle/bin" -type f)
  return "$ok"
}

# The bundle's test binaries that need a GPU (make_bundle.sh builds them),
# and the CPU backend's own tests, run beside them.
GPU_TESTS=(cuda_probe_test cuda_device_test cuda_vs_cpu_test mlp_cuda_test
  wide_deep_cuda_test graph_cuda_test select_device_test device_test)

# Runs every GPU test binary of the bundle with PSFLOW_REQUIRE_GPU=1, a log
# each in <log_dir>; reports each through `say` (passed, failed and skipped
# counts, seconds; and the failures' lines and any "[ MARGIN ]" lines a
# test prints into $summary). Returns 1 when any failed.
#
# Each test runs under `timeout` (PSFLOW_TEST_TIMEOUT seconds, default
# 300), cut short so that none runs past PSFLOW_TESTS_DEADLINE (a time in
# seconds since the epoch, when set); tests left when it has passed are
# reported as not run.
run_gpu_tests() {
  local bundle="$1" log_dir="$2" test log status=0 limit left start rc
  mkdir -p "$log_dir"
  for test in "${GPU_TESTS[@]}"; do
    log="$log_dir/$test.log"
    limit="${PSFLOW_TEST_TIMEOUT:-300}"
    if [ -n "${PSFLOW_TESTS_DEADLINE:-}" ]; then
      left=$((PSFLOW_TESTS_DEADLINE - $(date +%s)))
      if [ "$left" -lt 5 ]; then
        say "- $test: NOT RUN (the tests' time is spent)"
        status=1
        continue
      fi
      [ "$left" -lt "$limit" ] && limit="$left"
    fi
    start=$SECONDS
    PSFLOW_REQUIRE_GPU=1 timeout --kill-after=5 "$limit" "$bundle/bin/$test" >"$log" 2>&1
    rc=$?
    local counts
    counts="$(grep -c '^\[       OK \]' "$log") passed, $(grep -c '^\[  FAILED  \].*(.* ms)$' "$log") failed, $(grep -c '^\[  SKIPPED \].*(.* ms)$' "$log") skipped, $((SECONDS - start)) s"
    if [ "$rc" = 0 ]; then
      say "- $test: PASSED ($counts)"
    else
      [ "$rc" = 124 ] || [ "$rc" = 137 ] && counts="$counts; TIMED OUT after $limit s"
      say "- $test: FAILED ($counts; see tests/$test.log)"
      grep -E '^\[  FAILED  \].*\(.* ms\)$|Failure|error' "$log" | head -20 | tee -a "$summary"
      status=1
    fi
    grep '^\[ MARGIN' "$log" | sed 's/^/    /' | tee -a "$summary"
  done
  return "$status"
}

# Writes <output>: job config <config> with <epochs> epochs and its
# Fashion-MNIST files read from <data_dir> instead of Debian's path (so that
# each job takes well under a minute, on a machine without the package).
short_config() {  # <config> <epochs> <output> <data_dir>
  python3 - "$@" <<'PY'
import json, sys
config = json.load(open(sys.argv[1]))
config["training"]["epochs"] = int(sys.argv[2])
prefix = "/usr/share/datasets/fashion-mnist"
for key, path in config["data"].items():
    if isinstance(path, str) and path.startswith(prefix + "/"):
        config["data"][key] = sys.argv[4] + path[len(prefix):]
json.dump(config, open(sys.argv[3], "w"), indent=1)
PY
}
