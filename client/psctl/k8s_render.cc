#include "client/psctl/k8s_render.h"

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/psctl/image_reference.h"
#include "client/psctl/k8s_role_job.h"
#include "client/psctl/tfconfig_gen.h"
#include "common/task.h"

namespace psflow {
namespace {

using k8s_render_internal::kMetricsPort;
using k8s_render_internal::kPort;
using k8s_render_internal::kReadWriteMany;
using k8s_render_internal::kReadWriteOnce;
using k8s_render_internal::RenderRoleJob;
using k8s_render_internal::Role;
using k8s_render_internal::RoleObjectName;
using k8s_render_internal::TaskAddresses;

// Namespaces with this label set to "true" (Prometheus') may scrape the
// metrics port; nothing else outside the job reaches the pods.
constexpr char kMonitoringLabel[] = "psflow/monitoring";

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

// A Kubernetes quantity as these manifests use it: a decimal number with
// an optional suffix ("2", "500m", "1.5", "4Gi", "10G"), nothing else (a
// newline would start another YAML document).
bool IsQuantity(absl::string_view q) {
  static const char* const kSuffixes[] = {
      "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "m", "k", "M", "G", "T", "P", "E"};
  for (const char* suffix : kSuffixes) {
    if (absl::ConsumeSuffix(&q, suffix)) break;
  }
  if (q.empty() || q.size() > 20) return false;
  bool digits = false, dot = false;
  for (char c : q) {
    if (absl::ascii_isdigit(c)) {
      digits = true;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      return false;
    }
  }
  return digits;
}

// A DNS subdomain (a storage class's name): lowercase labels joined by '.'.
bool IsDnsSubdomain(absl::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  for (absl::string_view label : absl::StrSplit(name, '.')) {
    if (label.empty() || !absl::ascii_isalnum(label.front()) ||
        !absl::ascii_isalnum(label.back())) {
      return false;
    }
    for (char c : label) {
      if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c) && c != '-') {
        return false;
      }
    }
  }
  return true;
}

// A path inside the image that goes into a shell command line unquoted:
// letters, digits and "/._-" only.
bool IsPlainPath(absl::string_view path) {
  if (path.empty() || path.front() != '/' || path.size() > 1024) return false;
  for (char c : path) {
    if (!absl::ascii_isalnum(c) && c != '/' && c != '.' && c != '_' &&
        c != '-') {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::Status CheckK8sRenderOptions(const K8sRenderOptions& options) {
  constexpr int kMaxK8sTasksPerRole = 1000;
  if (!IsDnsLabel(options.name, 40)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--name=", options.name,
        " is not a DNS label: use lowercase letters, digits and '-', "
        "starting with a letter, at most 40 characters"));
  }
  if (!IsDnsLabel(options.ns, 63)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--k8s_namespace=", absl::CEscape(options.ns),
                     " is not a DNS label: lowercase letters, digits and "
                     "'-', starting with a letter, at most 63 characters"));
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
  // Each Job carries the whole cluster in its TF_CONFIG: past this, one
  // object outgrows what the API server stores (about 1.5 MiB).
  if (options.num_ps > kMaxK8sTasksPerRole ||
      options.num_workers > kMaxK8sTasksPerRole ||
      options.gpus_per_worker > 64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--ps=", options.num_ps, " --workers=", options.num_workers,
        " --gpus_per_worker=", options.gpus_per_worker, ": at most ",
        kMaxK8sTasksPerRole, " parameter servers and ", kMaxK8sTasksPerRole,
        " workers (each Job carries the whole cluster), and 64 GPUs a "
        "worker"));
  }
  for (const auto& [flag, value] : {std::pair<const char*, const std::string*>{
                                        "--storage", &options.storage},
                                    {"--cpu", &options.cpu},
                                    {"--memory", &options.memory}}) {
    if (!IsQuantity(*value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, "=", absl::CEscape(*value),
          " is not a Kubernetes quantity: a number with an optional suffix, "
          "such as 2, 500m, 4Gi or 10G"));
    }
  }
  if (!options.storage_class.empty() &&
      !IsDnsSubdomain(options.storage_class)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--storage_class=", absl::CEscape(options.storage_class),
                     " is not a storage class name: lowercase letters, "
                     "digits, '-' and '.'"));
  }
  if (!IsPlainPath(options.job_config)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--job=", absl::CEscape(options.job_config),
        " is not a plain absolute path inside the image (letters, digits "
        "and /._- only): it goes into each task's command line"));
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
TaskAddresses AddressesOf(const K8sRenderOptions& options,
                          const std::vector<Role>& roles) {
  TaskAddresses addresses;
  for (const Role& role : roles) {
    const std::string service = RoleObjectName(options, role);
    for (int i = 0; i < role.count; ++i) {
      addresses[role.type].push_back(absl::StrCat(
          service, "-", i, ".", service, ".", options.ns, ".svc:", kPort));
    }
  }
  return addresses;
}

// The comment at the top: how to make the Secrets and apply the manifests.
std::string RenderHeader(const K8sRenderOptions& options,
                         const TaskAddresses& addresses) {
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
  return out;
}

// Only the job's own pods reach its ports; Prometheus in a labelled
// namespace reaches the metrics port.
std::string RenderNetworkPolicy(const K8sRenderOptions& options) {
  return absl::StrCat(
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
}

// The claim for checkpoints and logs.
std::string RenderVolumeClaim(const K8sRenderOptions& options) {
  std::string out = absl::StrCat(
      "---\napiVersion: v1\nkind: PersistentVolumeClaim\n",
      "metadata:\n  name: ", options.name, "-data\n  namespace: ", options.ns,
      "\n  labels:\n    psflow/job: ", options.name,
      "\nspec:\n  accessModes: [", options.storage_access_mode, "]\n");
  if (!options.storage_class.empty()) {
    absl::StrAppend(&out, "  storageClassName: ", options.storage_class, "\n");
  }
  absl::StrAppend(&out, "  resources:\n    requests:\n      storage: ",
                  options.storage, "\n");
  return out;
}

// Headless Service: stable DNS per pod, published before readiness
// (tasks wait for each other at start).
std::string RenderService(const K8sRenderOptions& options, const Role& role) {
  return absl::StrCat(
      "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: ",
      RoleObjectName(options, role), "\n  namespace: ", options.ns,
      "\n  labels:\n    psflow/job: ", options.name,
      "\n    psflow/role: ", role.short_name,
      "\nspec:\n  clusterIP: None\n  publishNotReadyAddresses: true\n"
      "  selector:\n    psflow/job: ",
      options.name, "\n    psflow/role: ", role.short_name,
      "\n  ports:\n  - name: grpc\n    port: ", kPort, "\n");
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
  const TaskAddresses addresses = AddressesOf(options, roles);
  std::string out =
      absl::StrCat(RenderHeader(options, addresses),
                   RenderNetworkPolicy(options), RenderVolumeClaim(options));
  for (const Role& role : roles) {
    absl::StrAppend(&out, RenderService(options, role),
                    RenderRoleJob(options, roles, addresses, role));
  }
  return out;
}

}  // namespace psflow
