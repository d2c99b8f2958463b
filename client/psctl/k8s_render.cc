#include "client/psctl/k8s_render.h"

#include <map>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "client/psctl/image_reference.h"
#include "client/psctl/tfconfig_gen.h"
#include "common/task.h"

namespace psflow {
namespace {

constexpr int kPort = 2222;
// Every task serves Prometheus metrics here (--metrics_port); the pods
// carry the usual prometheus.io scrape annotations.
constexpr int kMetricsPort = 9464;
constexpr char kIndexPlaceholder[] = "__INDEX__";
// Pods run as this user and group (not root; the image's files are
// world-readable), and the volumes are made theirs (fsGroup).
constexpr int kUser = 65532;
constexpr char kTlsDir[] = "/etc/psflow/tls";
constexpr char kTokenDir[] = "/etc/psflow/tokens";
// Namespaces with this label set to "true" (Prometheus') may scrape the
// metrics port; nothing else outside the job reaches the pods.
constexpr char kMonitoringLabel[] = "psflow/monitoring";
// Kubernetes sends every pod of a deleted or preempted job SIGTERM at once
// and SIGKILL this long after. The chief then saves a checkpoint, bounded
// by its --preemption_save_timeout_s (60), reading the parameter servers,
// which keep serving for their --termination_grace_s (70); 90 covers both
// with room for the shutdown after (docs/operations.md, "Stopping and
// preemption"). Workers and the evaluator exit at once regardless.
constexpr int kTerminationGraceSeconds = 90;
constexpr char kReadWriteOnce[] = "ReadWriteOnce";
constexpr char kReadWriteMany[] = "ReadWriteMany";

struct Role {
  TaskType type;
  std::string short_name;  // in object names: chief, ps, worker, evaluator
  int count;
  std::string binary;  // under /opt/psflow
};

bool IsDnsLabel(const std::string& s, size_t max) {
  if (s.empty() || s.size() > max || !absl::ascii_islower(s[0]) ||
      s.back() == '-') {
    return false;
  }
  for (char c : s) {
    if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c) && c != '-') {
      return false;
    }
  }
  return true;
}

// YAML single-quoted scalar.
std::string Quote(const std::string& s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "''"}}), "'");
}

}  // namespace

absl::Status CheckK8sRenderOptions(const K8sRenderOptions& options) {
  if (!IsDnsLabel(options.name, 40)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--name=", options.name,
        " is not a DNS label: use lowercase letters, digits and '-', "
        "starting with a letter, at most 40 characters"));
  }
  if (!IsDnsLabel(options.ns, 63)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--namespace=", options.ns, " is not a DNS label"));
  }
  if (options.image.empty()) {
    return absl::InvalidArgumentError(
        "--image is required: the psflow image (deploy/docker/Dockerfile)");
  }
  if (absl::StatusOr<ImageReference> image =
          ParseImageReference(options.image, "--image");
      !image.ok()) {
    return image.status();
  }
  if (options.image_pull_policy != "Always" &&
      options.image_pull_policy != "IfNotPresent" &&
      options.image_pull_policy != "Never") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--image_pull_policy=", options.image_pull_policy,
        " is not a pull policy: use Always, IfNotPresent or Never"));
  }
  if (options.storage_access_mode != kReadWriteOnce &&
      options.storage_access_mode != kReadWriteMany) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--storage_access_mode=", options.storage_access_mode,
        " is not supported: use ReadWriteOnce (the pods that mount the "
        "claim share a node) or ReadWriteMany (a class such as NFS)"));
  }
  if (options.num_ps < 1 || options.num_workers < 1 ||
      options.gpus_per_worker < 0) {
    return absl::InvalidArgumentError(
        "--ps and --workers must be at least 1, --gpus_per_worker at least 0");
  }
  return absl::OkStatus();
}

namespace {

std::vector<Role> RolesOf(const K8sRenderOptions& options) {
  std::vector<Role> roles = {
      {TaskType::kChief, "chief", 1, "chief/chief"},
      {TaskType::kPs, "ps", options.num_ps, "ps/ps_server"},
      {TaskType::kWorker, "worker", options.num_workers, "worker/worker"},
  };
  if (options.evaluator) {
    roles.push_back(
        {TaskType::kEvaluator, "evaluator", 1, "evaluator/evaluator"});
  }
  return roles;
}

// Every task's stable DNS name.
std::map<TaskType, std::vector<std::string>> AddressesOf(
    const K8sRenderOptions& options, const std::vector<Role>& roles) {
  std::map<TaskType, std::vector<std::string>> addresses;
  for (const Role& role : roles) {
    const std::string service =
        absl::StrCat(options.name, "-", role.short_name);
    for (int i = 0; i < role.count; ++i) {
      addresses[role.type].push_back(absl::StrCat(
          service, "-", i, ".", service, ".", options.ns, ".svc:", kPort));
    }
  }
  return addresses;
}

// Whether a role's pods mount the claim: those that read or write
// checkpoints (the chief its index and state file, parameter servers their
// shards, the evaluator to evaluate and keep the best) always; workers
// (only event files) when the claim is ReadWriteMany.
bool MountsClaim(const K8sRenderOptions& options, TaskType type) {
  return type != TaskType::kWorker ||
         options.storage_access_mode == kReadWriteMany;
}

}  // namespace

std::vector<TaskId> K8sJobTasks(const K8sRenderOptions& options) {
  std::vector<TaskId> tasks;
  for (const Role& role : RolesOf(options)) {
    for (int i = 0; i < role.count; ++i) tasks.push_back({role.type, i});
  }
  return tasks;
}

absl::StatusOr<std::string> RenderK8sManifests(
    const K8sRenderOptions& options) {
  if (absl::Status checked = CheckK8sRenderOptions(options); !checked.ok()) {
    return checked;
  }
  const std::vector<Role> roles = RolesOf(options);
  const std::map<TaskType, std::vector<std::string>> addresses =
      AddressesOf(options, roles);

  std::string out = absl::StrCat("# psflow job \"", options.name,
                                 "\": rendered by `psctl k8s render`.\n");
  if (options.secure) {
    const std::string tls_secret = options.name + "-tls";
    const std::string token_secret = options.name + "-tokens";
    absl::StrAppend(
        &out,
        "# Secure: every task uses mutual TLS and its role's job token.\n"
        "# kustomization.yaml (written beside this file by `psctl k8s "
        "render\n# --out_dir`) builds the Secrets ",
        tls_secret, " and ", token_secret,
        "\n# from files made once, in its directory, by these commands "
        "(keep the\n# files: psctl uses psctl.crt and admin.token):\n"
        "#   psctl certs gen --tf_config='",
        BuildTfConfigJson(addresses, TaskId{TaskType::kChief, 0}),
        "' \\\n#     --job=", options.name, " --secret_name=", tls_secret,
        " --namespace=", options.ns, " --out=", tls_secret,
        "\n#   psctl tokens gen --secret_name=", token_secret,
        " --namespace=", options.ns, " --out=", token_secret,
        "\n# Apply: kubectl apply -k <that directory>; without "
        "kustomization.yaml,\n#   kubectl apply -f ",
        tls_secret, "/secret.yaml -f ", token_secret,
        "/secret.yaml -f <this file>\n");
  } else {
    absl::StrAppend(&out,
                    "# Apply: kubectl apply -k <the directory of "
                    "kustomization.yaml> or\n#   kubectl apply -f <this "
                    "file>.\n");
  }
  absl::StrAppend(&out, "# The job has ended when Job ", options.name,
                  "-chief completes.\n");
  // Only the job's own pods reach its ports; Prometheus in a labelled
  // namespace reaches the metrics port.
  absl::StrAppend(
      &out,
      "---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n"
      "metadata:\n  name: ",
      options.name, "\n  namespace: ", options.ns,
      "\n  labels:\n    psflow/job: ", options.name,
      "\nspec:\n  podSelector:\n    matchLabels:\n      psflow/job: ",
      options.name,
      "\n  policyTypes: [Ingress]\n  ingress:\n  - from:\n    - podSelector:\n"
      "        matchLabels:\n          psflow/job: ",
      options.name, "\n    ports:\n    - protocol: TCP\n      port: ", kPort,
      "\n    - protocol: TCP\n      port: ", kMetricsPort,
      "\n  - from:\n    - namespaceSelector:\n        matchLabels:\n"
      "          ",
      kMonitoringLabel,
      ": \"true\"\n    ports:\n    - protocol: TCP\n      port: ", kMetricsPort,
      "\n");
  // The claim for checkpoints and logs.
  absl::StrAppend(
      &out, "---\napiVersion: v1\nkind: PersistentVolumeClaim\n",
      "metadata:\n  name: ", options.name, "-data\n  namespace: ", options.ns,
      "\n  labels:\n    psflow/job: ", options.name,
      "\nspec:\n  accessModes: [", options.storage_access_mode, "]\n");
  if (!options.storage_class.empty()) {
    absl::StrAppend(&out, "  storageClassName: ", options.storage_class, "\n");
  }
  absl::StrAppend(&out, "  resources:\n    requests:\n      storage: ",
                  options.storage, "\n");

  for (const Role& role : roles) {
    const std::string name = absl::StrCat(options.name, "-", role.short_name);
    // The TF_CONFIG with the index left open; the container fills it in.
    std::string tf_config = BuildTfConfigJson(addresses, TaskId{role.type, 0});
    const std::string index_field = "\"index\": 0}";
    tf_config = absl::StrCat(tf_config.substr(0, tf_config.rfind(index_field)),
                             "\"index\": ", kIndexPlaceholder, "}}");
    std::vector<std::string> args;
    switch (role.type) {
      case TaskType::kChief:
        args = {"--job=" + options.job_config,
                "--checkpoint_dir=/data/checkpoints", "--logdir=/data/logs",
                "--result_file=/data/result.json"};
        break;
      case TaskType::kWorker:
      case TaskType::kEvaluator:
        args = {"--logdir=/data/logs",
                options.gpus_per_worker > 0 && role.type == TaskType::kWorker
                    ? "--device=cuda"
                    : "--device=auto"};
        break;
      case TaskType::kPs:
        args = {"--logdir=/data/logs",  // its system metrics
                "--checkpoint_root=/data/checkpoints"};
        break;
    }
    std::string command = absl::StrCat(
        "export TF_CONFIG=\"${TF_CONFIG_TEMPLATE%", kIndexPlaceholder,
        "*}${JOB_COMPLETION_INDEX:?}${TF_CONFIG_TEMPLATE##*", kIndexPlaceholder,
        "}\"; exec /opt/psflow/", role.binary);
    args.push_back(absl::StrCat("--metrics_port=", kMetricsPort));
    if (options.secure) {
      args.push_back("--transport_security=mtls");
      args.push_back(absl::StrCat("--tls_dir=", kTlsDir));
      args.push_back(absl::StrCat("--token_dir=", kTokenDir));
    }
    for (const std::string& a : args) absl::StrAppend(&command, " ", a);

    // Headless Service: stable DNS per pod, published before readiness
    // (tasks wait for each other at start).
    absl::StrAppend(
        &out, "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: ", name,
        "\n  namespace: ", options.ns,
        "\n  labels:\n    psflow/job: ", options.name,
        "\n    psflow/role: ", role.short_name,
        "\nspec:\n  clusterIP: None\n  publishNotReadyAddresses: true\n"
        "  selector:\n    psflow/job: ",
        options.name, "\n    psflow/role: ", role.short_name,
        "\n  ports:\n  - name: grpc\n    port: ", kPort, "\n");
    absl::StrAppend(
        &out, "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: ", name,
        "\n  namespace: ", options.ns,
        "\n  labels:\n    psflow/job: ", options.name,
        "\n    psflow/role: ", role.short_name,
        "\nspec:\n  completionMode: Indexed\n  completions: ", role.count,
        "\n  parallelism: ", role.count,
        // A crashed task is restarted in place (same name, same address);
        // the chief recovers a restarted ps from the newest checkpoint.
        "\n  backoffLimit: ", 10 * role.count,
        "\n  template:\n    metadata:\n      annotations:\n"
        "        prometheus.io/scrape: \"true\"\n"
        "        prometheus.io/port: \"",
        kMetricsPort,
        "\"\n        prometheus.io/path: /metrics\n      labels:\n"
        "        psflow/job: ",
        options.name, "\n        psflow/role: ", role.short_name,
        "\n    spec:\n      subdomain: ", name,
        "\n      restartPolicy: OnFailure\n"
        "      # On SIGTERM the chief saves a checkpoint (at most 60 s) from "
        "the\n      # parameter servers, which keep serving for 70 s: "
        "SIGKILL comes after both.\n"
        "      terminationGracePeriodSeconds: ",
        kTerminationGraceSeconds, "\n");
    const bool mounts_claim = MountsClaim(options, role.type);
    if (mounts_claim && options.storage_access_mode == kReadWriteOnce) {
      // The first of these pods goes anywhere (it matches its own term);
      // the others join it, where the volume is attached.
      std::vector<std::string> sharing;
      for (const Role& other : roles) {
        if (MountsClaim(options, other.type)) {
          sharing.push_back(other.short_name);
        }
      }
      absl::StrAppend(
          &out,
          "      # The claim is ReadWriteOnce: the pods that mount it share "
          "a node.\n"
          "      affinity:\n        podAffinity:\n"
          "          requiredDuringSchedulingIgnoredDuringExecution:\n"
          "          - labelSelector:\n              matchLabels:\n"
          "                psflow/job: ",
          options.name,
          "\n              matchExpressions:\n"
          "              - key: psflow/role\n"
          "                operator: In\n                values: [",
          absl::StrJoin(sharing, ", "),
          "]\n            topologyKey: kubernetes.io/hostname\n");
    }
    absl::StrAppend(
        &out,
        "      automountServiceAccountToken: false\n"
        "      securityContext:\n        runAsNonRoot: true\n"
        "        runAsUser: ",
        kUser, "\n        runAsGroup: ", kUser, "\n        fsGroup: ", kUser,
        "\n        seccompProfile:\n          type: RuntimeDefault\n"
        "      containers:\n      - name: psflow\n        image: ",
        options.image, "\n        imagePullPolicy: ", options.image_pull_policy,
        "\n        command: [/bin/sh, -c, ", Quote(command),
        "]\n        env:\n        - name: TF_CONFIG_TEMPLATE\n          "
        "value: ",
        Quote(tf_config),
        "\n        securityContext:\n"
        "          allowPrivilegeEscalation: false\n"
        "          readOnlyRootFilesystem: true\n"
        "          capabilities:\n            drop: [ALL]\n"
        "        ports:\n        - name: grpc\n",
        "          containerPort: ", kPort, "\n        - name: metrics\n",
        "          containerPort: ", kMetricsPort, "\n");
    // kubelet's gRPC probes speak plaintext only: with TLS, the port.
    const std::string probe =
        options.secure ? absl::StrCat("tcpSocket:\n            port: ", kPort)
                       : absl::StrCat("grpc:\n            port: ", kPort);
    absl::StrAppend(
        &out, "        readinessProbe:\n          ", probe,
        "\n          periodSeconds: 5\n        livenessProbe:\n          ",
        probe,
        "\n          initialDelaySeconds: 10\n          periodSeconds: 10\n"
        "          failureThreshold: 6\n");
    const std::string amounts =
        absl::StrCat("            cpu: ", Quote(options.cpu),
                     "\n            memory: ", options.memory, "\n");
    absl::StrAppend(&out, "        resources:\n          requests:\n", amounts,
                    "          limits:\n", amounts);
    if (role.type == TaskType::kWorker && options.gpus_per_worker > 0) {
      absl::StrAppend(
          &out, "            nvidia.com/gpu: ", options.gpus_per_worker, "\n");
    }
    absl::StrAppend(&out,
                    "        volumeMounts:\n        - name: data\n"
                    "          mountPath: /data\n        - name: tmp\n"
                    "          mountPath: /tmp\n");
    if (options.secure) {
      absl::StrAppend(&out,
                      "        - name: tls\n          mountPath: ", kTlsDir,
                      "\n          readOnly: true\n        - name: tokens\n"
                      "          mountPath: ",
                      kTokenDir, "\n          readOnly: true\n");
    }
    if (mounts_claim) {
      absl::StrAppend(&out,
                      "      volumes:\n"
                      "      - name: data\n        persistentVolumeClaim:\n"
                      "          claimName: ",
                      options.name, "-data\n");
    } else {
      // Event files only, kept as long as the pod.
      absl::StrAppend(&out,
                      "      volumes:\n"
                      "      - name: data\n        emptyDir: {}\n");
    }
    absl::StrAppend(&out, "      - name: tmp\n        emptyDir: {}\n");
    if (options.secure) {
      // 288 is 0440: readable by the pod's group (fsGroup) only.
      absl::StrAppend(&out,
                      "      - name: tls\n        secret:\n          "
                      "secretName: ",
                      options.name,
                      "-tls\n          defaultMode: 288\n"
                      "      - name: tokens\n        secret:\n"
                      "          secretName: ",
                      options.name,
                      "-tokens\n          defaultMode: 288\n"
                      "          items:\n");
      // Each role gets only what it needs: its token to present, the
      // digests to check callers (parameter servers and the chief).
      std::vector<std::string> files;
      if (role.type != TaskType::kPs) {
        files.push_back(absl::StrCat(role.short_name, ".token"));
      }
      if (role.type == TaskType::kPs || role.type == TaskType::kChief) {
        files.push_back("tokens.sha256");
      }
      for (const std::string& file : files) {
        absl::StrAppend(&out, "          - key: ", file,
                        "\n            path: ", file, "\n");
      }
    }
  }
  return out;
}

}  // namespace psflow
