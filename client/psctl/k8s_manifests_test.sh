#!/usr/bin/env bash
# Renders Kubernetes manifests with psctl and checks them, and the TFJob
# manifest, with a real YAML parser (Debian's python3-yaml) in
# k8s_manifests_check.py; every derived TF_CONFIG also goes through
# `psctl tfconfig check`, the parser every role uses.
# The checked-in manifests and kustomization for the default job
# (deploy/k8s/psflow.yaml, deploy/k8s/kustomization.yaml) must equal what
# psctl renders for it, so they never drift; //deploy:k8s_kustomization_test
# checks what they apply.
#   k8s_manifests_test.sh <psctl> <k8s_manifests_check.py> <tfjob.yaml> \
#       <deploy/k8s/psflow.yaml> <deploy/k8s/kustomization.yaml>
set -euo pipefail
psctl="$1"
check="$2"
tfjob="$3"
checked_in="$4"
checked_in_kustomization="$5"
out="${TEST_TMPDIR:-$(mktemp -d)}"

"$psctl" k8s render --image=registry.example/psflow:1 --name=mnist \
  --ps=2 --workers=3 --k8s_namespace=ml > "$out/cpu.yaml"
"$psctl" k8s render --image=registry.example/psflow:1 --name=gpujob \
  --ps=1 --workers=2 --evaluator=false --gpus_per_worker=1 \
  --storage_class=nfs --storage_access_mode=ReadWriteMany --secure=false \
  > "$out/gpu.yaml"
"$psctl" k8s render --image=psflow:dev --out_dir="$out/default" > /dev/null

python3 "$check" "$psctl" "$out/cpu.yaml" mnist ml 2 3 1 0 1 ReadWriteOnce
python3 "$check" "$psctl" "$out/gpu.yaml" gpujob default 1 2 0 1 0 ReadWriteMany
python3 "$check" "$psctl" "$out/default/psflow.yaml" psflow default 1 2 1 0 1 \
  ReadWriteOnce
for pair in "$checked_in:psflow.yaml" \
  "$checked_in_kustomization:kustomization.yaml"; do
  if ! diff -u "${pair%%:*}" "$out/default/${pair##*:}"; then
    echo "FAIL: ${pair%%:*} is not what psctl k8s render --image=psflow:dev" \
      "--out_dir=deploy/k8s renders; regenerate it (docs/operations.md," \
      "\"Kubernetes\")" >&2
    exit 1
  fi
done
# Printed, the manifests are the same as written.
"$psctl" k8s render --image=psflow:dev | diff -u "$checked_in" -

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
refused() {  # refused <message> <flags...>: the render fails naming why
  local message="$1"
  shift
  if "$psctl" k8s render "$@" 2> "$out/err"; then
    echo "FAIL: psctl k8s render $* was accepted" >&2
    exit 1
  fi
  grep -qF -- "$message" "$out/err" || {
    echo "FAIL: psctl k8s render $* did not say '$message':" \
      "$(cat "$out/err")" >&2
    exit 1
  }
}
refused "is not a pull policy" --image=x --image_pull_policy=Sometimes
refused "is not supported: use ReadWriteOnce" --image=x \
  --storage_access_mode=ReadOnlyMany
refused "is not an image reference" "--image=psflow dev"
refused "has an empty name, tag or digest" --image=psflow:
refused "has an empty name, tag or digest" --image=registry.example/
# Values that go into the YAML or the tasks' command lines unquoted: a
# newline would start another (privileged) document, a ';' another command.
refused "--storage=10Gi\\n---\\nkind: Pod is not a Kubernetes quantity" \
  --image=x $'--storage=10Gi\n---\nkind: Pod'
refused "--memory=-5 is not a Kubernetes quantity" --image=x --memory=-5
refused "--cpu=lots is not a Kubernetes quantity" --image=x --cpu=lots
refused "is not a storage class name" --image=x $'--storage_class=nfs\nx: y'
refused "is not a plain absolute path inside the image" --image=x \
  '--job=configs/a b.json; touch /tmp/pwned'
refused "--k8s_namespace=ML is not a DNS label" --image=x --k8s_namespace=ML
refused "at most 1000 parameter servers" --image=x --workers=2147483647
"$psctl" k8s render --image=x --cpu=500m --memory=1.5Gi --storage=20G \
  --storage_class=fast.ssd > /dev/null
echo "PASS"
