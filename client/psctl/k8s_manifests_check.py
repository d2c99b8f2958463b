#!/usr/bin/env python3
"""Checks Kubernetes manifests with a YAML parser.

  k8s_manifests_check.py <psctl> <rendered.yaml> <name> <namespace> \
      <num_ps> <num_workers> <evaluator 0|1> <gpus_per_worker> <secure 0|1> \
      <ReadWriteOnce|ReadWriteMany>
  k8s_manifests_check.py <psctl> --tfjob <tfjob.yaml>

For rendered manifests: the objects and fields that matter (claim, one
headless Service and Indexed Job per role, probes, volumes, GPUs, the
image pull policy, the grace period the chief's SIGTERM save needs; with a
ReadWriteOnce claim, only the pods that read or write checkpoints mount
it, on one node; the hardening: non-root, read-only root filesystem, no
privilege escalation, capabilities dropped, requests = limits, the
NetworkPolicy with the monitoring namespaces on the metrics port only;
when secure, the TLS and token Secrets with only each role's files), and,
by
running each Job's own container command with sh, the TF_CONFIG every pod
derives from its completion index, which must name that pod's own stable
DNS address and pass `psctl tfconfig check`.
"""
import json
import re
import subprocess
import sys

import yaml


def fail(message):
    print("k8s_manifests_check: " + message)
    sys.exit(1)


def expect(condition, message):
    if not condition:
        fail(message)


def tfconfig_check(psctl, tf_config):
    result = subprocess.run([psctl, "tfconfig", "check",
                             "--tf_config=" + tf_config],
                            capture_output=True, text=True)
    expect(result.returncode == 0,
           "psctl tfconfig check refused %s: %s" % (tf_config, result.stderr))


def derived_tf_config(container, index):
    """Runs the container's command up to its exec, with the pod's env."""
    command = container["command"]
    expect(command[:2] == ["/bin/sh", "-c"], "command is not sh -c: %r" % command)
    script = command[2]
    prefix, exec_part = script.split("; exec ", 1)
    env = {e["name"]: e["value"] for e in container["env"]}
    env["JOB_COMPLETION_INDEX"] = str(index)
    result = subprocess.run(["/bin/sh", "-c", prefix + '; printf %s "$TF_CONFIG"'],
                            env=env, capture_output=True, text=True)
    expect(result.returncode == 0, "the command failed: " + result.stderr)
    return result.stdout, exec_part


def check_hardening(object_name, pod, container, secure):
    context = pod["securityContext"]
    expect(context["runAsNonRoot"] is True and context["runAsUser"] != 0,
           "%s: runs as a non-root user" % object_name)
    expect(context["seccompProfile"] == {"type": "RuntimeDefault"},
           "%s: seccomp" % object_name)
    expect(pod["automountServiceAccountToken"] is False,
           "%s: no service-account token" % object_name)
    own = container["securityContext"]
    expect(own["allowPrivilegeEscalation"] is False,
           "%s: no privilege escalation" % object_name)
    expect(own["readOnlyRootFilesystem"] is True,
           "%s: read-only root filesystem" % object_name)
    expect(own["capabilities"] == {"drop": ["ALL"]},
           "%s: every capability dropped" % object_name)
    resources = container["resources"]
    for amount in ("cpu", "memory"):
        expect(resources["requests"][amount] == resources["limits"][amount],
               "%s: %s request = limit" % (object_name, amount))
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    expect(mounts["tmp"]["mountPath"] == "/tmp", "%s: a writable /tmp" %
           object_name)
    volumes = {v["name"]: v for v in pod["volumes"]}
    if secure:
        for volume in ("tls", "tokens"):
            expect(mounts[volume]["readOnly"] is True,
                   "%s: %s mounted read-only" % (object_name, volume))
            expect(volumes[volume]["secret"]["defaultMode"] == 0o440,
                   "%s: %s files 0440" % (object_name, volume))
    else:
        expect("tls" not in volumes and "tokens" not in volumes,
               "%s: no secrets when not secure" % object_name)


def token_files(pod):
    volumes = {v["name"]: v for v in pod["volumes"]}
    return sorted(item["key"] for item in volumes["tokens"]["secret"]["items"])


def check_rendered(psctl, path, name, namespace, num_ps, num_workers,
                   evaluator, gpus, secure, access_mode):
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    kinds = {}
    for d in docs:
        kinds.setdefault(d["kind"], []).append(d)
    roles = {"chief": 1, "ps": num_ps, "worker": num_workers}
    if evaluator:
        roles["evaluator"] = 1
    expect(len(kinds.get("PersistentVolumeClaim", [])) == 1, "one claim")
    claim = kinds["PersistentVolumeClaim"][0]
    expect(claim["spec"]["accessModes"] == [access_mode],
           "the claim is %s: %r" % (access_mode, claim["spec"]["accessModes"]))
    # The roles whose pods read or write checkpoints; workers too when the
    # claim can be mounted anywhere.
    on_claim = [r for r in roles if r != "worker" or access_mode == "ReadWriteMany"]
    expect(len(kinds.get("Service", [])) == len(roles), "a Service per role")
    (policy,) = kinds["NetworkPolicy"]
    expect(policy["spec"]["podSelector"] == {"matchLabels": {"psflow/job": name}},
           "the NetworkPolicy covers the job's pods")
    expect(policy["spec"]["policyTypes"] == ["Ingress"], "ingress policy")
    (rule, monitoring) = policy["spec"]["ingress"]
    expect(rule["from"] == [{"podSelector": {"matchLabels": {"psflow/job": name}}}],
           "only the job's own pods are admitted: %r" % rule["from"])
    expect(sorted(p["port"] for p in rule["ports"]) == [2222, 9464],
           "to the job's ports: %r" % rule["ports"])
    expect(monitoring["from"] == [{"namespaceSelector": {"matchLabels": {
               "psflow/monitoring": "true"}}}],
           "monitoring namespaces are admitted: %r" % monitoring["from"])
    expect(monitoring["ports"] == [{"protocol": "TCP", "port": 9464}],
           "monitoring reaches the metrics port only: %r" % monitoring["ports"])
    expect(len(kinds.get("Job", [])) == len(roles), "a Job per role")
    services = {s["metadata"]["name"]: s for s in kinds["Service"]}
    jobs = {j["metadata"]["name"]: j for j in kinds["Job"]}
    binaries = {"chief": "/opt/psflow/chief/chief", "ps": "/opt/psflow/ps/ps_server",
                "worker": "/opt/psflow/worker/worker",
                "evaluator": "/opt/psflow/evaluator/evaluator"}
    for role, count in roles.items():
        object_name = "%s-%s" % (name, role)
        service = services[object_name]
        expect(service["metadata"]["namespace"] == namespace, "namespace")
        expect(service["spec"]["clusterIP"] == "None", "headless service")
        expect(service["spec"]["publishNotReadyAddresses"] is True,
               "addresses published before readiness")
        expect(service["spec"]["ports"][0]["port"] == 2222, "port 2222")
        job = jobs[object_name]
        spec = job["spec"]
        expect(spec["completionMode"] == "Indexed", "Indexed Job")
        expect(spec["completions"] == count and spec["parallelism"] == count,
               "%s: %d pods" % (object_name, count))
        pod = spec["template"]["spec"]
        expect(pod["subdomain"] == object_name, "subdomain = service name")
        expect(pod["restartPolicy"] == "OnFailure", "restarted in place")
        expect(pod["terminationGracePeriodSeconds"] == 90,
               "%s: 90 s to stop (the chief's SIGTERM save takes up to 60 s)"
               % object_name)
        expect(spec["template"]["metadata"]["labels"] ==
               service["spec"]["selector"], "the service selects the pods")
        (container,) = pod["containers"]
        expect(container["imagePullPolicy"] == "IfNotPresent",
               "%s: an image on the node is used" % object_name)
        expect(container["ports"][0]["containerPort"] == 2222, "port")
        expect({"name": "metrics", "containerPort": 9464} in
               container["ports"], "%s: metrics port 9464" % object_name)
        annotations = spec["template"]["metadata"]["annotations"]
        expect(annotations == {"prometheus.io/scrape": "true",
                               "prometheus.io/port": "9464",
                               "prometheus.io/path": "/metrics"},
               "%s: scrape annotations %r" % (object_name, annotations))
        expect("--metrics_port=9464" in container["command"][2],
               "%s serves its metrics" % object_name)
        for probe in ("readinessProbe", "livenessProbe"):
            kind = "tcpSocket" if secure else "grpc"
            expect(container[probe][kind]["port"] == 2222,
                   "%s: %s %s" % (object_name, kind, probe))
        check_hardening(object_name, pod, container, secure)
        if secure:
            wanted = {"chief": ["chief.token", "tokens.sha256"],
                      "ps": ["tokens.sha256"],
                      "worker": ["worker.token"],
                      "evaluator": ["evaluator.token"]}[role]
            expect(token_files(pod) == wanted,
                   "%s mounts %r of the tokens" % (object_name,
                                                   token_files(pod)))
        expect(container["volumeMounts"][0]["mountPath"] == "/data", "mount")
        data = pod["volumes"][0]
        expect(data["name"] == "data", "the data volume")
        affinity = pod.get("affinity")
        if role in on_claim:
            expect(data.get("persistentVolumeClaim", {}).get("claimName") ==
                   claim["metadata"]["name"], "%s mounts the claim" % role)
        else:
            expect(data.get("emptyDir") == {},
                   "%s keeps /data in the pod: %r" % (role, data))
        if role in on_claim and access_mode == "ReadWriteOnce":
            expect(affinity == {"podAffinity": {
                       "requiredDuringSchedulingIgnoredDuringExecution": [{
                           "labelSelector": {
                               "matchLabels": {"psflow/job": name},
                               "matchExpressions": [{
                                   "key": "psflow/role", "operator": "In",
                                   "values": on_claim}]},
                           "topologyKey": "kubernetes.io/hostname"}]}},
                   "%s shares a node with the claim's other pods: %r" %
                   (role, affinity))
        else:
            expect(affinity is None, "%s goes to any node" % role)
        limits = container["resources"].get("limits", {})
        if role == "worker" and gpus > 0:
            expect(limits.get("nvidia.com/gpu") == gpus, "GPU limit")
        else:
            expect("nvidia.com/gpu" not in limits, "no GPU for " + role)
        for index in range(count):
            tf_config, exec_part = derived_tf_config(container, index)
            parsed = json.loads(tf_config)
            expect(parsed["task"] == {"type": role, "index": index},
                   "task of %s pod %d: %r" % (role, index, parsed["task"]))
            own = parsed["cluster"][role][index]
            expect(own == "%s-%d.%s.%s.svc:2222" % (object_name, index,
                                                    object_name, namespace),
                   "pod %s-%d address %s" % (object_name, index, own))
            expect(len(parsed["cluster"]["ps"]) == num_ps, "ps count")
            expect(len(parsed["cluster"]["worker"]) == num_workers,
                   "worker count")
            tfconfig_check(psctl, tf_config)
            expect(exec_part.startswith(binaries[role]),
                   "%s runs %s" % (role, exec_part))
            expect("--logdir=/data/logs" in exec_part,
                   "%s writes its event file on the claim" % role)
            if secure:
                for flag in ("--transport_security=mtls",
                             "--tls_dir=/etc/psflow/tls",
                             "--token_dir=/etc/psflow/tokens"):
                    expect(flag in exec_part, "%s: %s" % (role, flag))
            if role == "ps":
                expect("--checkpoint_root=/data/checkpoints" in exec_part,
                       "ps checkpoint paths confined to the claim")
            if role == "chief":
                expect("--checkpoint_dir=/data/checkpoints" in exec_part,
                       "checkpoints on the claim")
            if role == "worker":
                device = "--device=cuda" if gpus > 0 else "--device=auto"
                expect(device in exec_part, "worker " + device)
    print("k8s_manifests_check: OK, %s: %d objects" % (path, len(docs)))


def check_tfjob(psctl, path):
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    (tfjob,) = [d for d in docs if d["kind"] == "TFJob"]
    expect(tfjob["apiVersion"] == "kubeflow.org/v1", "kubeflow.org/v1")
    specs = tfjob["spec"]["tfReplicaSpecs"]
    expect(set(specs) == {"Chief", "PS", "Worker", "Evaluator"},
           "replica types: %r" % sorted(specs))
    name = tfjob["metadata"]["name"]
    cluster = {}
    for kind, spec in specs.items():
        (container,) = spec["template"]["spec"]["containers"]
        expect(container["name"] == "tensorflow",
               "TFJob requires the container to be named tensorflow")
        expect({"name": "tfjob-port", "containerPort": 2222} in
               container["ports"], "%s: tfjob-port 2222" % kind)
        expect(container["command"][0].startswith("/opt/psflow/"),
               "%s runs a psflow binary" % kind)
        # A locally built or loaded image is used; the chief's checkpoint
        # on SIGTERM (60 s) and the servers' grace (70 s) fit the period.
        expect(container.get("imagePullPolicy") == "IfNotPresent",
               "%s: imagePullPolicy IfNotPresent" % kind)
        expect(spec["template"]["spec"].get(
            "terminationGracePeriodSeconds", 30) >= 90,
               "%s: terminationGracePeriodSeconds >= 90" % kind)
        # Metrics: every task serves them, named and annotated for scrapes.
        expect("--metrics_port=9464" in container["command"],
               "%s serves its metrics on 9464" % kind)
        expect({"name": "metrics", "containerPort": 9464} in
               container["ports"], "%s: metrics port" % kind)
        annotations = spec["template"].get("metadata", {}).get(
            "annotations", {})
        expect(annotations.get("prometheus.io/scrape") == "true" and
               annotations.get("prometheus.io/port") == "9464",
               "%s: scrape annotations %r" % (kind, annotations))
        expect("--logdir=/data/logs" in container["command"],
               "%s writes its event file on the claim" % kind)
        if kind == "PS":
            expect("--checkpoint_root=/data/checkpoints" in
                   container["command"], "PS checkpoint paths confined")
        pod = spec["template"]["spec"]
        check_hardening(kind, pod, container, secure=True)
        for flag in ("--transport_security=mtls", "--tls_dir=/etc/psflow/tls",
                     "--token_dir=/etc/psflow/tokens"):
            expect(flag in container["command"], "%s: %s" % (kind, flag))
        wanted = {"Chief": ["chief.token", "tokens.sha256"],
                  "PS": ["tokens.sha256"], "Worker": ["worker.token"],
                  "Evaluator": ["evaluator.token"]}[kind]
        expect(token_files(pod) == wanted,
               "%s mounts %r of the tokens" % (kind, token_files(pod)))
        for probe in ("readinessProbe", "livenessProbe"):
            if probe in container:
                expect("tcpSocket" in container[probe],
                       "%s: %s checks the TCP port" % (kind, probe))
        cluster[kind.lower()] = ["%s-%s-%d.default.svc:2222" %
                                 (name, kind.lower(), i)
                                 for i in range(spec["replicas"])]
    (policy,) = [d for d in docs if d["kind"] == "NetworkPolicy"]
    selector = {"matchLabels": {"training.kubeflow.org/job-name": name}}
    expect(policy["spec"]["podSelector"] == selector and
           policy["spec"]["ingress"][0]["from"] == [{"podSelector": selector}],
           "the NetworkPolicy admits only the job's pods")
    # The header's certificate command names the pods TFJob makes.
    text = open(path).read()
    header = re.search(r"^#   psctl certs gen --tf_config='(.*)' ", text, re.M)
    expect(header is not None, "the header says how to make certificates")
    header_cluster = json.loads(header.group(1))["cluster"]
    expect(header_cluster == cluster,
           "the header's cluster %r is TFJob's %r" % (header_cluster, cluster))
    # The TF_CONFIG TFJob generates for each pod (its operator's format:
    # every replica type in the cluster, "environment": "cloud") must pass
    # psflow's parser unchanged.
    for kind, addresses in cluster.items():
        for index in range(len(addresses)):
            tf_config = json.dumps({"cluster": cluster,
                                    "task": {"type": kind, "index": index},
                                    "environment": "cloud"})
            tfconfig_check(psctl, tf_config)
    print("k8s_manifests_check: OK, %s" % path)


def main(argv):
    if len(argv) == 4 and argv[2] == "--tfjob":
        check_tfjob(argv[1], argv[3])
    elif len(argv) == 11:
        check_rendered(argv[1], argv[2], argv[3], argv[4], int(argv[5]),
                       int(argv[6]), argv[7] == "1", int(argv[8]),
                       argv[9] == "1", argv[10])
    else:
        fail(__doc__)


if __name__ == "__main__":
    main(sys.argv)
