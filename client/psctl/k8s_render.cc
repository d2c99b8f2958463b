#include "client/psctl/k8s_render.h"

#include <map>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "client/psctl/tfconfig_gen.h"
#include "common/task.h"

namespace psflow {
namespace {

constexpr int kPort = 2222;
// Every task serves Prometheus metrics here (--metrics_port); the pods
// carry the usual prometheus.io scrape annotations.
constexpr int kMetricsPort = 9464;
constexpr char kIndexPlaceholder[] = "__INDEX__";

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

absl::StatusOr<std::string> RenderK8sManifests(
    const K8sRenderOptions& options) {
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
  if (options.num_ps < 1 || options.num_workers < 1 ||
      options.gpus_per_worker < 0) {
    return absl::InvalidArgumentError(
        "--ps and --workers must be at least 1, --gpus_per_worker at least 0");
  }
  std::vector<Role> roles = {
      {TaskType::kChief, "chief", 1, "chief/chief"},
      {TaskType::kPs, "ps", options.num_ps, "ps/ps_server"},
      {TaskType::kWorker, "worker", options.num_workers, "worker/worker"},
  };
  if (options.evaluator) {
    roles.push_back(
        {TaskType::kEvaluator, "evaluator", 1, "evaluator/evaluator"});
  }
  // Every task's stable DNS name.
  std::map<TaskType, std::vector<std::string>> addresses;
  for (const Role& role : roles) {
    const std::string service =
        absl::StrCat(options.name, "-", role.short_name);
    for (int i = 0; i < role.count; ++i) {
      addresses[role.type].push_back(absl::StrCat(
          service, "-", i, ".", service, ".", options.ns, ".svc:", kPort));
    }
  }

  std::string out = absl::StrCat(
      "# psflow job \"", options.name, "\": rendered by `psctl k8s render`.\n",
      "# Apply: kubectl apply -f <this file>; the job has ended when Job ",
      options.name, "-chief completes.\n");
  // The claim for checkpoints and logs.
  absl::StrAppend(&out, "---\napiVersion: v1\nkind: PersistentVolumeClaim\n",
                  "metadata:\n  name: ", options.name,
                  "-data\n  namespace: ", options.ns,
                  "\n  labels:\n    psflow/job: ", options.name,
                  "\nspec:\n  accessModes: [ReadWriteMany]\n");
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
        "\n      restartPolicy: OnFailure\n      containers:\n"
        "      - name: psflow\n        image: ",
        options.image, "\n        command: [/bin/sh, -c, ", Quote(command),
        "]\n        env:\n        - name: TF_CONFIG_TEMPLATE\n          "
        "value: ",
        Quote(tf_config), "\n        ports:\n        - name: grpc\n",
        "          containerPort: ", kPort, "\n        - name: metrics\n",
        "          containerPort: ", kMetricsPort,
        "\n        readinessProbe:\n          grpc:\n            port: ", kPort,
        "\n          periodSeconds: 5\n        livenessProbe:\n          "
        "grpc:\n"
        "            port: ",
        kPort,
        "\n          initialDelaySeconds: 10\n          periodSeconds: 10\n"
        "          failureThreshold: 6\n        resources:\n          "
        "requests:\n"
        "            cpu: ",
        Quote(options.cpu), "\n            memory: ", options.memory, "\n");
    if (role.type == TaskType::kWorker && options.gpus_per_worker > 0) {
      absl::StrAppend(&out, "          limits:\n            nvidia.com/gpu: ",
                      options.gpus_per_worker, "\n");
    }
    absl::StrAppend(&out,
                    "        volumeMounts:\n        - name: data\n"
                    "          mountPath: /data\n      volumes:\n"
                    "      - name: data\n        persistentVolumeClaim:\n"
                    "          claimName: ",
                    options.name, "-data\n");
  }
  return out;
}

}  // namespace psflow
