#include "client/psctl/k8s_role_job.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "client/psctl/tfconfig_gen.h"
#include "common/task.h"

namespace psflow {
namespace k8s_render_internal {
namespace {

constexpr char kIndexPlaceholder[] = "__INDEX__";
// Pods run as this user and group (not root; the image's files are
// world-readable), and the volumes are made theirs (fsGroup).
constexpr int kUser = 65532;
constexpr char kTlsDir[] = "/etc/psflow/tls";
constexpr char kTokenDir[] = "/etc/psflow/tokens";
// Kubernetes sends every pod of a deleted or preempted job SIGTERM at once
// and SIGKILL this long after. The chief then saves a checkpoint, bounded
// by its --preemption_save_timeout_s (60), reading the parameter servers,
// which keep serving for their --termination_grace_s (70); 90 covers both
// with room for the shutdown after (docs/operations.md, "Stopping and
// preemption"). Workers and the evaluator exit at once regardless.
constexpr int kTerminationGraceSeconds = 90;

// YAML single-quoted scalar.
std::string Quote(const std::string& s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "''"}}), "'");
}

// Whether a role's pods mount the claim: those that read or write
// checkpoints (the chief its index and state file, parameter servers their
// shards, the evaluator to evaluate and keep the best) always; workers
// (only event files) when the claim is ReadWriteMany.
bool MountsClaim(const K8sRenderOptions& options, TaskType type) {
  return type != TaskType::kWorker ||
         options.storage_access_mode == kReadWriteMany;
}

// The role's TF_CONFIG with the index left open; the container fills it in.
std::string TfConfigTemplate(const TaskAddresses& addresses, const Role& role) {
  const std::string tf_config =
      BuildTfConfigJson(addresses, TaskId{role.type, 0});
  const std::string index_field = "\"index\": 0}";
  return absl::StrCat(tf_config.substr(0, tf_config.rfind(index_field)),
                      "\"index\": ", kIndexPlaceholder, "}}");
}

// The container's shell command: TF_CONFIG from the pod's completion
// index, then the role's binary with its flags.
std::string TaskCommand(const K8sRenderOptions& options, const Role& role) {
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
  return command;
}

// The Job's metadata and spec, and its pod template's up to scheduling.
std::string RenderJobHead(const K8sRenderOptions& options, const Role& role) {
  const std::string name = RoleObjectName(options, role);
  return absl::StrCat(
      "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: ", name,
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
}

// With a ReadWriteOnce claim, the pods that mount it share a node: the
// first goes anywhere (it matches its own term), the others join it,
// where the volume is attached. Empty for pods that need no affinity.
std::string RenderClaimAffinity(const K8sRenderOptions& options,
                                const std::vector<Role>& roles,
                                const Role& role) {
  if (!MountsClaim(options, role.type) ||
      options.storage_access_mode != kReadWriteOnce) {
    return "";
  }
  std::vector<std::string> sharing;
  for (const Role& other : roles) {
    if (MountsClaim(options, other.type)) sharing.push_back(other.short_name);
  }
  return absl::StrCat(
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

// The pod's hardening and its container up to the probes: image,
// command, TF_CONFIG template, the container's hardening and ports.
std::string RenderContainer(const K8sRenderOptions& options,
                            const TaskAddresses& addresses, const Role& role) {
  return absl::StrCat(
      "      automountServiceAccountToken: false\n"
      "      securityContext:\n        runAsNonRoot: true\n"
      "        runAsUser: ",
      kUser, "\n        runAsGroup: ", kUser, "\n        fsGroup: ", kUser,
      "\n        seccompProfile:\n          type: RuntimeDefault\n"
      "      containers:\n      - name: psflow\n        image: ",
      options.image, "\n        imagePullPolicy: ", options.image_pull_policy,
      "\n        command: [/bin/sh, -c, ", Quote(TaskCommand(options, role)),
      "]\n        env:\n        - name: TF_CONFIG_TEMPLATE\n          "
      "value: ",
      Quote(TfConfigTemplate(addresses, role)),
      "\n        securityContext:\n"
      "          allowPrivilegeEscalation: false\n"
      "          readOnlyRootFilesystem: true\n"
      "          capabilities:\n            drop: [ALL]\n"
      "        ports:\n        - name: grpc\n",
      "          containerPort: ", kPort, "\n        - name: metrics\n",
      "          containerPort: ", kMetricsPort, "\n");
}

// kubelet's gRPC probes speak plaintext only: with TLS, the port.
std::string RenderProbes(const K8sRenderOptions& options) {
  const std::string probe =
      options.secure ? absl::StrCat("tcpSocket:\n            port: ", kPort)
                     : absl::StrCat("grpc:\n            port: ", kPort);
  return absl::StrCat(
      "        readinessProbe:\n          ", probe,
      "\n          periodSeconds: 5\n        livenessProbe:\n          ", probe,
      "\n          initialDelaySeconds: 10\n          periodSeconds: 10\n"
      "          failureThreshold: 6\n");
}

// Requests equal to limits; a worker's GPUs are limits only.
std::string RenderResources(const K8sRenderOptions& options, const Role& role) {
  const std::string amounts =
      absl::StrCat("            cpu: ", Quote(options.cpu),
                   "\n            memory: ", options.memory, "\n");
  std::string out = absl::StrCat("        resources:\n          requests:\n",
                                 amounts, "          limits:\n", amounts);
  if (role.type == TaskType::kWorker && options.gpus_per_worker > 0) {
    absl::StrAppend(
        &out, "            nvidia.com/gpu: ", options.gpus_per_worker, "\n");
  }
  return out;
}

std::string RenderVolumeMounts(const K8sRenderOptions& options) {
  std::string out =
      "        volumeMounts:\n        - name: data\n"
      "          mountPath: /data\n        - name: tmp\n"
      "          mountPath: /tmp\n";
  if (options.secure) {
    absl::StrAppend(&out, "        - name: tls\n          mountPath: ", kTlsDir,
                    "\n          readOnly: true\n        - name: tokens\n"
                    "          mountPath: ",
                    kTokenDir, "\n          readOnly: true\n");
  }
  return out;
}

// The two Secrets' volumes. Each role gets only the token files it needs:
// its token to present, the digests to check callers (parameter servers
// and the chief).
std::string RenderSecretVolumes(const K8sRenderOptions& options,
                                const Role& role) {
  // 288 is 0440: readable by the pod's group (fsGroup) only.
  std::string out =
      absl::StrCat("      - name: tls\n        secret:\n          secretName: ",
                   options.name,
                   "-tls\n          defaultMode: 288\n"
                   "      - name: tokens\n        secret:\n"
                   "          secretName: ",
                   options.name,
                   "-tokens\n          defaultMode: 288\n"
                   "          items:\n");
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
  return out;
}

std::string RenderVolumes(const K8sRenderOptions& options, const Role& role) {
  std::string out;
  if (MountsClaim(options, role.type)) {
    out = absl::StrCat(
        "      volumes:\n"
        "      - name: data\n        persistentVolumeClaim:\n"
        "          claimName: ",
        options.name, "-data\n");
  } else {
    // Event files only, kept as long as the pod.
    out =
        "      volumes:\n"
        "      - name: data\n        emptyDir: {}\n";
  }
  absl::StrAppend(&out, "      - name: tmp\n        emptyDir: {}\n");
  if (options.secure) absl::StrAppend(&out, RenderSecretVolumes(options, role));
  return out;
}

}  // namespace

std::string RoleObjectName(const K8sRenderOptions& options, const Role& role) {
  return absl::StrCat(options.name, "-", role.short_name);
}

std::string RenderRoleJob(const K8sRenderOptions& options,
                          const std::vector<Role>& roles,
                          const TaskAddresses& addresses, const Role& role) {
  // The parts in the order of the manifest.
  return absl::StrCat(
      RenderJobHead(options, role), RenderClaimAffinity(options, roles, role),
      RenderContainer(options, addresses, role), RenderProbes(options),
      RenderResources(options, role), RenderVolumeMounts(options),
      RenderVolumes(options, role));
}

}  // namespace k8s_render_internal
}  // namespace psflow
