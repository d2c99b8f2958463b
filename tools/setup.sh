#!/usr/bin/env bash
# Installs every Debian package psflow needs to build, test and run its
# default job on a fresh Debian 12 machine. Idempotent: packages already
# present are skipped, so a second run finishes in seconds.
# Works as root or through sudo.
#
#   tools/setup.sh            what the build, the tests and the default job need
#   tools/setup.sh --bench    also the peers benchmarks compare with (PyTorch,
#                             for bench/convnet_bench.py and convnet_torch.py)
set -euo pipefail

PACKAGES=(
  # Build: Bazel 4.2.3 (pulls a JDK), the C++ toolchain, pkg-config.
  bazel-bootstrap g++ pkg-config
  # System libraries wrapped in //third_party.
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgtest-dev libgmock-dev zlib1g-dev libssl-dev
  # The HTTP server behind every task's /metrics.
  libcivetweb-dev
  # CPU backend GEMMs (measured faster than our own; see bench/RESULTS.md).
  libopenblas-dev
  # Real data for the default job and the training tests.
  dataset-fashion-mnist
  # Test and benchmark helpers (independent readers, loopback baseline).
  python3 python3-yaml iperf3 procps
  # A CPU-heavy neighbour for checking the suite does not depend on the
  # machine's speed (docs/testing.md).
  stress-ng
  # The relocatable bundle (//deploy:bundle) points its binaries at its lib/.
  patchelf
  # Formatting check in CI; clang for the thread-safety build
  # (--config=clang).
  clang-format clang-14
  # Sanitizer runtimes for --config=asan and --config=tsan (gcc).
  libasan8 libubsan1 libtsan2
  # A real Prometheus server and the reference exposition parser for the
  # metrics tests.
  prometheus python3-prometheus-client
)
if [ "${1:-}" = "--bench" ]; then
  PACKAGES+=(python3-torch)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "setup: need root or sudo to install: ${missing[*]}" >&2
    exit 1
  fi
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "setup: done"
