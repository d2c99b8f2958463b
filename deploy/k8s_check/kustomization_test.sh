#!/usr/bin/env bash
# `kubectl apply -k deploy/k8s/` applies what it should. For a copy of
# deploy/k8s/, and for two other jobs psctl renders with --out_dir (bigger
# and in another namespace; GPUs, ReadWriteMany, not secure, an image by
# digest): runs the credential commands of the manifests' header as
# written (with this build's psctl), builds the kustomization
# (kustomize_build.py; also `kubectl kustomize`, compared, where kubectl is
# installed), and checks
#   - the generated Secrets hold exactly what psctl's own secret.yaml
#     files hold, and every Secret key, Secret and claim a pod names exists;
#   - every container runs the kustomization's image, and a changed
#     images: entry reaches every container;
#   - every object is valid against the Kubernetes schemas, unknown fields
#     being errors (validate_objects.js, kubernetes-models from npm, which
#     tools/setup.sh installs into ~/.cache/psflow/k8s-schemas).
# And that each check can fail: an object with an unknown field or a
# mistyped one, a kustomization with a field the builder does not
# implement, a missing credential file and a pod naming a Secret key
# nobody generates are each refused. Without node (tools/setup.sh installs
# it) the schema checks are SKIPPED, loudly; everything else still runs.
#   kustomization_test.sh <psctl> <kustomization.yaml> <psflow.yaml> \
#       <kustomize_build.py> <validate_objects.js> <package-lock.json>
set -euo pipefail
psctl="$(realpath "$1")"
kustomization="$2"
manifests="$3"
build="$(realpath "$4")"
validate="$(realpath "$5")"
lock="$6"
tmp="${TEST_TMPDIR:-$(mktemp -d)}/kustomization_test"
rm -rf "$tmp"
mkdir -p "$tmp"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Runs the psctl commands of the header of <dir>/<manifests> in <dir>, as
# a user would copy them from it.
make_credentials() {  # make_credentials <dir> <manifests file name>
  local commands
  commands="$(python3 - "$1/$2" <<'PY'
import sys
# The header: the comment lines before the first object.
header = []
for line in open(sys.argv[1]):
    if not line.startswith("#"):
        break
    header.append(line[1:].rstrip("\n"))
commands, current = [], None
for line in header:
    if current is not None:
        current += "\n" + line
    elif line.startswith("   psctl "):
        current = line.strip()
    if current is not None and not current.endswith("\\"):
        commands.append(current)
        current = None
print("\n".join(commands))
PY
)"
  [ "$(grep -c '^psctl ' <<< "$commands" || true)" -eq 2 ] ||
    fail "$2's header should give two psctl commands (certs gen, tokens gen), gives: $commands"
  (
    cd "$1"
    psctl() { "$psctl" "$@" > /dev/null; }
    eval "$commands"
  )
}

# What kubectl applies: Secrets equal to psctl's own, every reference
# resolved, one image everywhere.
check_built() {  # check_built <built.json> <expected image> <kustomization dir>
  python3 - "$1" "$2" "$3" <<'PY'
import json, os, sys, yaml
objects = json.load(open(sys.argv[1]))
image = sys.argv[2]
directory = sys.argv[3]
def fail(message):
    sys.exit("FAIL: " + message)
by_kind = {}
for o in objects:
    by_kind.setdefault(o["kind"], {})[(o["metadata"].get("namespace"),
                                      o["metadata"]["name"])] = o
secrets = by_kind.get("Secret", {})
psctl_secrets = 0
for entry in sorted(os.listdir(directory)):
    mine = os.path.join(directory, entry, "secret.yaml")
    if not os.path.isfile(mine):
        continue
    psctl_secrets += 1
    want = yaml.safe_load(open(mine))
    key = (want["metadata"]["namespace"], want["metadata"]["name"])
    if key not in secrets:
        fail("psctl's %s is not among the built Secrets %s" % (mine, sorted(secrets)))
    got = secrets[key]
    if got["data"] != want["data"] or got["type"] != want["type"]:
        fail("Secret %s/%s differs from psctl's %s: keys %s, psctl's %s" % (
            key + (mine, sorted(got["data"]), sorted(want["data"]))))
if len(secrets) != psctl_secrets:
    fail("built Secrets %s, psctl wrote %d" % (sorted(secrets), psctl_secrets))
claims = by_kind.get("PersistentVolumeClaim", {})
jobs = by_kind.get("Job", {})
if not jobs:
    fail("no Jobs built")
for (namespace, name), job in sorted(jobs.items()):
    pod = job["spec"]["template"]["spec"]
    for container in pod.get("containers", []) + pod.get("initContainers", []):
        if container["image"] != image:
            fail("Job %s runs %s, not %s" % (name, container["image"], image))
    for volume in pod.get("volumes", []):
        if "secret" in volume:
            secret_name = volume["secret"]["secretName"]
            secret = secrets.get((namespace, secret_name))
            if secret is None:
                fail("Job %s mounts Secret %s/%s, which is not built" % (
                    name, namespace, secret_name))
            for item in volume["secret"].get("items", []):
                if item["key"] not in secret["data"]:
                    fail("Job %s mounts key %s of Secret %s, which has only %s" % (
                        name, item["key"], secret_name, sorted(secret["data"])))
        if "persistentVolumeClaim" in volume:
            claim = volume["persistentVolumeClaim"]["claimName"]
            if (namespace, claim) not in claims:
                fail("Job %s mounts claim %s/%s, which is not built" % (
                    name, namespace, claim))
print("check_built: %s: %d objects, %d Jobs, every reference resolved, "
      "image %s" % (directory, len(objects), len(jobs), image))
PY
}

# kustomize itself, where installed, builds the same objects.
compare_with_kubectl() {  # compare_with_kubectl <kustomization dir>
  if ! command -v kubectl > /dev/null 2>&1; then
    echo "NOTE: kubectl is not installed: $1 not built with kubectl kustomize"
    return
  fi
  kubectl kustomize "$1" > "$tmp/kubectl.yaml" ||
    fail "kubectl kustomize $1 failed"
  python3 "$build" "$1" > "$tmp/ours.json"
  python3 - "$tmp/kubectl.yaml" "$tmp/ours.json" "$1" <<'PY'
import base64, json, sys, yaml
def canonical(o):
    # kustomize wraps long base64 values across lines; the API server's
    # decoder skips the line breaks, so compare what they decode to.
    if o.get("kind") == "Secret":
        o = dict(o, data={k: base64.b64encode(base64.b64decode(v)).decode()
                          for k, v in (o.get("data") or {}).items()})
    return json.dumps(o, sort_keys=True)
def by_id(objects):
    return {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]):
            canonical(o) for o in objects}
theirs = by_id(d for d in yaml.safe_load_all(open(sys.argv[1])) if d)
ours = by_id(json.load(open(sys.argv[2])))
differ = sorted(k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k))
if differ:
    k = differ[0]
    sys.exit("FAIL: %s: kubectl kustomize and kustomize_build.py disagree on "
             "%s; the first:\n  kubectl: %s\n  ours:    %s" % (
                 sys.argv[3], differ, theirs.get(k), ours.get(k)))
print("kubectl kustomize agrees: %s: %d objects" % (sys.argv[3], len(theirs)))
PY
}

# The image a kustomization's images: entry names.
image_of() {  # image_of <kustomization dir>
  python3 - "$1/kustomization.yaml" <<'PY'
import sys, yaml
(entry,) = yaml.safe_load(open(sys.argv[1]))["images"]
print(entry["newName"] + (":" + entry["newTag"] if "newTag" in entry else "") +
      ("@" + entry["digest"] if "digest" in entry else ""))
PY
}

# deploy/k8s/ as a user has it, and two other jobs.
default="$tmp/default"
mkdir -p "$default"
cp "$kustomization" "$manifests" "$default/"
make_credentials "$default" "$(basename "$manifests")"
"$psctl" k8s render --image=registry.example/psflow:1 --name=mnist \
  --ps=2 --workers=3 --k8s_namespace=ml --out_dir="$tmp/mnist" > /dev/null
make_credentials "$tmp/mnist" mnist.yaml
"$psctl" k8s render --name=gpujob --gpus_per_worker=1 --evaluator=false \
  --image=registry.example/psflow@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef \
  --storage_class=nfs --storage_access_mode=ReadWriteMany --secure=false \
  --out_dir="$tmp/gpujob" > /dev/null
jobs=("$default" "$tmp/mnist" "$tmp/gpujob")
for job in "${jobs[@]}"; do
  python3 "$build" "$job" > "$job.json" ||
    fail "$job: the kustomization does not build with the header's credentials"
  check_built "$job.json" "$(image_of "$job")" "$job"
  compare_with_kubectl "$job"
done
[ "$(image_of "$default")" = "psflow:dev" ] ||
  fail "deploy/k8s/ runs $(image_of "$default"), the docs say psflow:dev"

# Pointed at a registry through images:, as docs/operations.md says.
registry="$tmp/registry"
cp -r "$default" "$registry"
python3 - "$registry/kustomization.yaml" <<'PY'
import sys, yaml
path = sys.argv[1]
kustomization = yaml.safe_load(open(path))
kustomization["images"][0].update(newName="registry.example:5000/ml/psflow",
                                  newTag="1.2")
yaml.safe_dump(kustomization, open(path, "w"))
PY
python3 "$build" "$registry" > "$registry.json"
check_built "$registry.json" "registry.example:5000/ml/psflow:1.2" "$registry"
compare_with_kubectl "$registry"

# Each check can fail.
expect_refused() {  # expect_refused <what> <pattern> <command...>
  local what="$1" pattern="$2"
  shift 2
  if "$@" > "$tmp/refused.out" 2>&1; then
    fail "$what was accepted"
  fi
  grep -qF -- "$pattern" "$tmp/refused.out" ||
    fail "$what was refused without naming '$pattern': $(cat "$tmp/refused.out")"
}
broken="$tmp/broken"
cp -r "$default" "$broken"
echo "patches: []" >> "$broken/kustomization.yaml"
expect_refused "a kustomization field kustomize_build.py does not implement" \
  "patches not implemented" python3 "$build" "$broken"
rm -rf "$broken" && cp -r "$default" "$broken"
rm "$broken/psflow-tokens/worker.token"
expect_refused "a missing credential file" \
  "psflow-tokens/worker.token does not exist" python3 "$build" "$broken"
rm -rf "$broken" && cp -r "$default" "$broken"
sed -i '/psflow-tokens\/chief.token/d' "$broken/kustomization.yaml"
sed -i '/^  chief.token:/d' "$broken/psflow-tokens/secret.yaml"
python3 "$build" "$broken" > "$broken.json"
expect_refused "a pod mounting a Secret key nobody generates" \
  "mounts key chief.token of Secret psflow-tokens" \
  check_built "$broken.json" "psflow:dev" "$broken"

# The schemas.
if ! command -v node > /dev/null 2>&1; then
  echo "SKIPPED: schema validation: node is not installed (tools/setup.sh installs it)"
  exit 0
fi
schemas="$(getent passwd "$(id -u)" | cut -d: -f6)/.cache/psflow/k8s-schemas"
cmp -s "$lock" "$schemas/installed-package-lock.json" ||
  fail "$schemas does not hold the kubernetes-models that $lock pins; run tools/setup.sh"
for job in "${jobs[@]}"; do
  node "$validate" "$schemas/node_modules" "$job.json" ||
    fail "$job: objects invalid against the Kubernetes schemas"
done
python3 - "$default.json" "$tmp/unknown.json" <<'PY'
import json, sys
objects = json.load(open(sys.argv[1]))
(job,) = [o for o in objects
          if o["kind"] == "Job" and o["metadata"]["name"] == "psflow-worker"]
job["spec"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Never"
json.dump(objects, open(sys.argv[2], "w"))
PY
expect_refused "a Job with an unknown field" \
  "Job psflow-worker: unknown field /spec/template/spec/containers/0/imagePullPolcy" \
  node "$validate" "$schemas/node_modules" "$tmp/unknown.json"
python3 - "$default.json" "$tmp/mistyped.json" <<'PY'
import json, sys
objects = json.load(open(sys.argv[1]))
(claim,) = [o for o in objects if o["kind"] == "PersistentVolumeClaim"]
claim["spec"]["accessModes"] = "ReadWriteOnce"
json.dump(objects, open(sys.argv[2], "w"))
PY
expect_refused "a claim whose accessModes is not a list" \
  "PersistentVolumeClaim psflow-data: data/spec/accessModes must be array" \
  node "$validate" "$schemas/node_modules" "$tmp/mistyped.json"
echo "PASS"
