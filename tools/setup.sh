#!/usr/bin/env bash
# Installs every Debian package psflow needs to build, test and run its
# default job on a fresh Debian 12 machine, then two npm packages the tests
# run under Node.js, each exactly as its package-lock.json pins it:
#   - kubernetes-models (deploy/k8s_check/) into ~/.cache/psflow/k8s-schemas,
#     where //deploy:k8s_kustomization_test validates the manifests with it;
#   - onnxruntime-node (tests/onnx_check/) into ~/.cache/psflow/onnxruntime,
#     the independent runtime //tests:onnx_export_test runs psflow's ONNX
#     exports with (its CPU build: --ignore-scripts skips the install
#     script, which only fetches optional GPU parts from outside npm).
# Idempotent: what is already present is skipped, so a second run finishes
# in seconds. Works as root or through sudo (apt only; the npm packages are
# installed as the user who runs this, for that user's tests).
#
#   tools/setup.sh            what the build, the tests and the default job need
#   tools/setup.sh --bench    the same (kept so that older commands work:
#                             PyTorch, which it used to add for the bench/
#                             *_torch.py peers, is now installed always, for
#                             //model/graph/parity:torch_parity_test)
#   tools/setup.sh --no-k8s-schemas
#                             neither Node.js nor its packages (the image
#                             build, deploy/docker/Dockerfile, needs no npm
#                             registry)
set -euo pipefail

bench=false
k8s_schemas=true
for arg in "$@"; do
  case "$arg" in
    --bench) bench=true ;;
    --no-k8s-schemas) k8s_schemas=false ;;
    *)
      echo "setup: unknown argument $arg; use --bench and/or --no-k8s-schemas" >&2
      exit 2
      ;;
  esac
done

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
  # ONNX's messages for `psctl ckpt export --format=onnx` (//third_party:
  # onnx_proto), and ONNX's own checker for the export test.
  libonnx-dev python3-onnx
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
  # The model zoo's PyTorch twins (//model/graph/parity:torch_parity_test,
  # which skips without it) and the bench/ peers compared with psflow.
  python3-torch
)
# --bench adds nothing any more (PyTorch is above); still accepted.
: "$bench"
# Node.js and npm run the Kubernetes schema check. Debian's, unless a node
# and npm are already on PATH (another distribution's nodejs, e.g.
# NodeSource's, bundles npm and conflicts with Debian's npm package).
if $k8s_schemas; then
  command -v node >/dev/null 2>&1 || PACKAGES+=(nodejs)
  command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
else
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
fi

# The npm packages, exactly as locked, under the home directory of the
# user running this (the passwd entry's: Bazel gives tests another $HOME).
# `npm ci` runs again only when the lock file changed or an install did not
# finish; the stamp is the lock it last installed.
if ! $k8s_schemas; then
  echo "setup: done (without Node.js and its packages)"
  exit 0
fi
cache="$(getent passwd "$(id -u)" | cut -d: -f6)/.cache/psflow"
repo="$(cd "$(dirname "$0")/.." && pwd)"
install_locked() {  # install_locked <what> <lock dir> <into> [npm ci flags...]
  local what="$1" lock_dir="$2" into="$3"
  shift 3
  local stamp="$into/installed-package-lock.json"
  if cmp -s "$lock_dir/package-lock.json" "$stamp"; then
    echo "setup: $what already installed in $into"
    return
  fi
  echo "setup: installing $what (npm ci) into $into"
  rm -f "$stamp"
  mkdir -p "$into"
  cp "$lock_dir/package.json" "$lock_dir/package-lock.json" "$into/"
  (cd "$into" && npm ci --no-audit --no-fund --loglevel=error "$@")
  cp "$lock_dir/package-lock.json" "$stamp"
}
install_locked kubernetes-models "$repo/deploy/k8s_check" "$cache/k8s-schemas"
install_locked onnxruntime-node "$repo/tests/onnx_check" "$cache/onnxruntime" \
  --ignore-scripts
echo "setup: done"
