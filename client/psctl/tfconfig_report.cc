#include "client/psctl/tfconfig_report.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace psflow {
namespace {

std::string ChiefLine(const TfConfig& config) {
  if (config.IsChief()) {
    if (config.task.type == TaskType::kChief) return "yes";
    return "yes (no \"chief\" job, so worker 0 runs the chief's duties)";
  }
  if (!config.ChiefAddress().ok()) {
    return "no, and the cluster names no chief: an evaluator follows the job "
           "through its chief, so add a \"chief\" task or worker 0";
  }
  return absl::StrCat("no (the chief is ", config.ChiefTask().ToString(), ")");
}

}  // namespace

std::string FormatTfConfigReport(const LoadedTfConfig& loaded) {
  const TfConfig& config = loaded.config;
  std::string out =
      absl::StrCat("TF_CONFIG from ", loaded.source, " is valid.\n");
  std::optional<std::string> address = config.TaskAddress();
  absl::StrAppend(
      &out, "task:          ", TaskTypeName(config.task.type), " ",
      config.task.index, " at ",
      address.has_value() ? *address : "(not listed in \"cluster\")", "\n");
  absl::StrAppend(&out, "acts as chief: ", ChiefLine(config), "\n");
  absl::StrAppend(
      &out, "rpc_layer:     ",
      config.rpc_layer.empty() ? "grpc (default)" : config.rpc_layer, "\n");
  if (!config.environment.empty()) {
    absl::StrAppend(&out, "environment:   ", config.environment, "\n");
  }
  if (!config.trial.empty()) {
    absl::StrAppend(&out, "trial:         ", config.trial, "\n");
  }
  const auto tasks = config.cluster.Tasks();
  absl::StrAppend(
      &out, "cluster:       ", config.cluster.NumTasks(TaskType::kChief),
      " chief, ", config.cluster.NumTasks(TaskType::kPs), " ps, ",
      config.cluster.NumTasks(TaskType::kWorker), " worker, ",
      config.cluster.NumTasks(TaskType::kEvaluator), " evaluator\n");
  for (const auto& [task, task_address] : tasks) {
    absl::StrAppend(
        &out, absl::StrFormat("  %-14s %s%s\n", task.ToString(), task_address,
                              task == config.task ? "   <- this task" : ""));
  }
  for (const std::string& warning : config.warnings) {
    absl::StrAppend(&out, "warning: ", warning, "\n");
  }
  return out;
}

}  // namespace psflow
