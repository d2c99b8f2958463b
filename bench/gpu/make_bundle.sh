#!/usr/bin/env bash
# Builds the GPU tests and benchmarks (--config=opt) and copies them, with
# the shared libraries they need that a GPU machine may lack (abseil,
# GoogleTest, libstdc++ from this Debian), into a folder that can be
# carried to a GPU machine. The CUDA libraries (libcublas, libcublasLt) are
# NOT bundled (over 500 MB): they must come from the GPU machine's CUDA 13
# toolkit or its PyTorch wheels; run_gpu_bench.sh finds them there.
#
#   bash bench/gpu/make_bundle.sh [gpu_bundle]
#
# It also packs the folder as gpu_bundle.tar.xz, which is what is carried.
# Then, on the GPU machine, from a checkout that has it:
#
#   bash bench/gpu/run_gpu_bench.sh gpu_bundle.tar.xz [out_dir]
#   bash bench/gpu/run_ctr_bench.sh gpu_bundle.tar.xz [out_dir]  # issue 18
#   bash bench/gpu/run_device_check.sh gpu_bundle.tar.xz gpu_data  # one short run
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-gpu_bundle}"
# 64 MiB is what a device session may carry with the working tree.
limit_bytes=$((60 * 1024 * 1024))

targets=(
  //bench/gpu:step_bench
  //bench/gpu:gemm_bench
  //bench:convnet_bench
  //model/device:device_test
  //model/device:select_device_test
  //model/device/cuda:cuda_probe_test
  //model/device/cuda:cuda_device_test
  //model/device/cuda:cuda_vs_cpu_test
  //model:mlp_cuda_test
  //model:wide_deep_cuda_test
  //model/graph:graph_cuda_test
)
# The whole-job and transport runs (issue 14): role binaries, psctl and the
# cluster benches, kept in their package folders (bin/ps/ps_server, ...) so
# that psctl's default --bin_dir and ps_bench's ps/ps_server resolve there.
tree_targets=(
  //client/psctl:psctl
  //ps:ps_server
  //worker:worker
  //chief:chief
  //evaluator:evaluator
  //bench:ps_bench
  //bench:trainer_bench
  //bench:embedding_bench
)
bazel build --config=opt "${targets[@]}" "${tree_targets[@]}"

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
binaries=()
built=()  # where Bazel put them: ldd resolves their RUNPATH from there
for target in "${targets[@]}"; do
  package="${target#//}"
  package="${package%%:*}"
  name="${target##*:}"
  cp -L "bazel-bin/$package/$name" "$out/bin/$name"
  chmod u+w "$out/bin/$name"
  strip --strip-debug "$out/bin/$name"
  binaries+=("$out/bin/$name")
  built+=("bazel-bin/$package/$name")
done
for target in "${tree_targets[@]}"; do
  package="${target#//}"
  package="${package%%:*}"
  name="${target##*:}"
  mkdir -p "$out/bin/$package"
  cp -L "bazel-bin/$package/$name" "$out/bin/$package/$name"
  chmod u+w "$out/bin/$package/$name"
  strip --strip-debug "$out/bin/$package/$name"
  binaries+=("$out/bin/$package/$name")
  built+=("bazel-bin/$package/$name")
done

# Every resolved dependency except the C library itself (the GPU machine
# has its own glibc; ours must not be mixed with it) and the CUDA libraries.
# The binaries themselves need glibc >= 2.34 (checked with objdump -T).
is_system() {
  case "$1" in
    linux-vdso.so.* | ld-linux-*.so.* | libc.so.* | libm.so.* | libdl.so.* | \
      librt.so.* | libpthread.so.*) return 0 ;;
    libcublas.so.* | libcublasLt.so.* | libcudart.so.* | libcuda.so.*) return 0 ;;
  esac
  return 1
}
for binary in "${built[@]}"; do
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    is_system "$name" && continue
    if [ "$path" = "not" ]; then
      echo "make_bundle: $binary needs $name, which is not found here" >&2
      exit 1
    fi
    # The C++ runtime goes apart: it needs this machine's glibc (2.36), so
    # run_gpu_bench.sh uses it only where the GPU machine's own is too old.
    dir="$out/lib"
    case "$name" in libstdc++.so.* | libgcc_s.so.*) dir="$out/lib-fallback" ;; esac
    mkdir -p "$dir"
    [ -e "$dir/$name" ] || cp -L "$path" "$dir/$name"
  done < <(ldd "$binary")
done

{
  echo "psflow GPU bundle"
  echo "commit: $(git rev-parse HEAD)$(git diff --quiet HEAD || echo ' (with local changes)')"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm), bazel --config=opt"
  echo "nvcc: $(/usr/local/cuda/bin/nvcc --version | tail -1)"
  echo "CUDA libraries the binaries need from the GPU machine:"
  for binary in "${binaries[@]}"; do
    readelf -d "$binary" | sed -n 's/.*NEEDED.*\[\(libcu[a-zA-Z]*\.so[.0-9]*\)\].*/  \1/p'
  done | sort -u
} >"$out/MANIFEST"

# Carried packed (OpenBLAS alone is 36 MB unpacked); run_gpu_bench.sh
# unpacks it.
tar -C "$(dirname "$out")" -cJf "$out.tar.xz" "$(basename "$out")"
bytes=$(stat -c %s "$out.tar.xz")
echo "make_bundle: $out.tar.xz holds ${#binaries[@]} binaries and $(ls "$out/lib" | wc -l) libraries, $((bytes / 1024 / 1024)) MiB packed"
cat "$out/MANIFEST"
if [ "$bytes" -gt "$limit_bytes" ]; then
  echo "make_bundle: over the $((limit_bytes / 1024 / 1024)) MiB that can be carried" >&2
  exit 1
fi
