#!/usr/bin/env bash
# Renders Kubernetes manifests with psctl and checks them, and the TFJob
# manifest, with a real YAML parser (Debian's python3-yaml) in
# k8s_manifests_check.py; every derived TF_CONFIG also goes through
# `psctl tfconfig check`, the parser every role uses.
# The checked-in manifests for the default job (deploy/k8s/psflow.yaml)
# must equal what psctl renders for it, so they never drift.
#   k8s_manifests_test.sh <psctl> <k8s_manifests_check.py> <tfjob.yaml> \
#       <deploy/k8s/psflow.yaml>
set -euo pipefail
psctl="$1"
check="$2"
tfjob="$3"
checked_in="$4"
out="${TEST_TMPDIR:-$(mktemp -d)}"

"$psctl" k8s render --image=registry.example/psflow:1 --name=mnist \
  --ps=2 --workers=3 --k8s_namespace=ml > "$out/cpu.yaml"
"$psctl" k8s render --image=registry.example/psflow:1 --name=gpujob \
  --ps=1 --workers=2 --evaluator=false --gpus_per_worker=1 \
  --storage_class=nfs --secure=false > "$out/gpu.yaml"
"$psctl" k8s render --image=psflow:latest > "$out/default.yaml"

python3 "$check" "$psctl" "$out/cpu.yaml" mnist ml 2 3 1 0 1
python3 "$check" "$psctl" "$out/gpu.yaml" gpujob default 1 2 0 1 0
python3 "$check" "$psctl" "$out/default.yaml" psflow default 1 2 1 0 1
if ! diff -u "$checked_in" "$out/default.yaml"; then
  echo "FAIL: $checked_in is not what psctl k8s render --image=psflow:latest" \
    "renders; regenerate it (docs/operations.md, \"Kubernetes\")" >&2
  exit 1
fi

# The Secrets' commands in the header work: certs for the tasks' names and
# tokens, whose Secret manifests parse.
header_certs=$(python3 -c '
import re, sys
m = re.search(r"^#   psctl certs gen --tf_config=\x27(.*)\x27 ", open(sys.argv[1]).read(), re.M)
print(m.group(1) if m else "")' "$out/cpu.yaml")
test -n "$header_certs"
"$psctl" certs gen --tf_config="$header_certs" --job=mnist \
  --secret_name=mnist-tls --namespace=ml --out="$out/mnist-tls" > /dev/null
test -f "$out/mnist-tls/worker-2.crt"
"$psctl" tokens gen --secret_name=mnist-tokens --namespace=ml \
  --out="$out/mnist-tokens" > /dev/null
python3 - "$out/mnist-tokens/secret.yaml" "$out/mnist-tls/secret.yaml" <<'PY'
import sys, yaml
tokens = yaml.safe_load(open(sys.argv[1]))
assert tokens["metadata"] == {"name": "mnist-tokens", "namespace": "ml"}, tokens
assert sorted(tokens["data"]) == ["chief.token", "evaluator.token",
                                  "tokens.sha256", "worker.token"], tokens
tls = yaml.safe_load(open(sys.argv[2]))
assert tls["metadata"]["name"] == "mnist-tls"
assert "ca.key" not in tls["data"]
PY
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
