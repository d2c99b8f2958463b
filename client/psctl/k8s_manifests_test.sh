#!/usr/bin/env bash
# Renders Kubernetes manifests with psctl and checks them, and the TFJob
# manifest, with a real YAML parser (Debian's python3-yaml) in
# k8s_manifests_check.py; every derived TF_CONFIG also goes through
# `psctl tfconfig check`, the parser every role uses.
#   k8s_manifests_test.sh <psctl> <k8s_manifests_check.py> <tfjob.yaml>
set -euo pipefail
psctl="$1"
check="$2"
tfjob="$3"
out="${TEST_TMPDIR:-$(mktemp -d)}"

"$psctl" k8s render --image=registry.example/psflow:1 --name=mnist \
  --ps=2 --workers=3 --k8s_namespace=ml > "$out/cpu.yaml"
"$psctl" k8s render --image=registry.example/psflow:1 --name=gpujob \
  --ps=1 --workers=2 --evaluator=false --gpus_per_worker=1 \
  --storage_class=nfs > "$out/gpu.yaml"

python3 "$check" "$psctl" "$out/cpu.yaml" mnist ml 2 3 1 0
python3 "$check" "$psctl" "$out/gpu.yaml" gpujob default 1 2 0 1
python3 "$check" "$psctl" --tfjob "$tfjob"

# Bad options are refused with the reason.
if "$psctl" k8s render --name=Bad_Name --image=x 2> "$out/err"; then
  echo "FAIL: a bad --name was accepted" >&2
  exit 1
fi
grep -q "is not a DNS label" "$out/err"
if "$psctl" k8s render 2> "$out/err"; then
  echo "FAIL: a missing --image was accepted" >&2
  exit 1
fi
grep -q -- "--image is required" "$out/err"
echo "PASS"
