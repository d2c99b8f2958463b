#include "client/psctl/tfconfig_gen.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/host_port.h"
#include "common/json.h"
#include "common/status_macros.h"
#include "common/tf_config.h"

namespace psflow {
namespace {

absl::StatusOr<std::string> WithPort(const std::string& address, int port,
                                     const std::string& what) {
  if (address.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has an empty host"));
  }
  absl::StatusOr<HostPort> parsed = ParseHostPort(address);
  if (parsed.ok()) return address;
  // A host alone (or a bracketed IPv6 address alone).
  const std::string candidate = absl::StrCat(address, ":", port);
  absl::StatusOr<HostPort> with_port = ParseHostPort(candidate);
  if (!with_port.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " \"", address, "\" is not host or host:port (",
                     parsed.status().message(), ")"));
  }
  return candidate;
}

}  // namespace

std::string BuildTfConfigJson(
    const std::map<TaskType, std::vector<std::string>>& addresses,
    const TaskId& task) {
  std::vector<std::string> jobs;
  for (const auto& [type, list] : addresses) {
    std::vector<std::string> quoted;
    for (const std::string& a : list) quoted.push_back(JsonQuote(a));
    jobs.push_back(absl::StrCat(JsonQuote(TaskTypeName(type)), ": [",
                                absl::StrJoin(quoted, ", "), "]"));
  }
  return absl::StrCat(
      "{\"cluster\": {", absl::StrJoin(jobs, ", "),
      "}, \"task\": {\"type\": ", JsonQuote(TaskTypeName(task.type)),
      ", \"index\": ", task.index, "}}");
}

absl::StatusOr<std::vector<std::pair<TaskId, std::string>>> GenerateTfConfigs(
    const TfConfigGenOptions& options) {
  if (options.ps.empty() || options.workers.empty()) {
    return absl::InvalidArgumentError(
        "a training cluster needs --ps and --workers (comma-separated "
        "host[:port] lists)");
  }
  std::map<TaskType, std::vector<std::string>> addresses;
  std::vector<TaskId> tasks;
  auto add = [&](TaskType type, const std::vector<std::string>& hosts,
                 const std::string& flag) -> absl::Status {
    for (size_t i = 0; i < hosts.size(); ++i) {
      ASSIGN_OR_RETURN(std::string address,
                       WithPort(hosts[i], options.default_port,
                                absl::StrCat("--", flag, " entry ", i + 1)));
      addresses[type].push_back(address);
      tasks.push_back(TaskId{type, static_cast<int>(i)});
    }
    return absl::OkStatus();
  };
  if (!options.chief.empty()) {
    RETURN_IF_ERROR(add(TaskType::kChief, {options.chief}, "chief"));
  }
  RETURN_IF_ERROR(add(TaskType::kPs, options.ps, "ps"));
  RETURN_IF_ERROR(add(TaskType::kWorker, options.workers, "workers"));
  if (!options.evaluator.empty()) {
    RETURN_IF_ERROR(
        add(TaskType::kEvaluator, {options.evaluator}, "evaluator"));
  }
  std::vector<std::pair<TaskId, std::string>> out;
  for (const TaskId& task : tasks) {
    std::string json = BuildTfConfigJson(addresses, task);
    // The same checks every role runs (e.g. an address used twice).
    absl::StatusOr<TfConfig> parsed = ParseTfConfig(json);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the cluster is not valid: ", parsed.status().message()));
    }
    out.emplace_back(task, std::move(json));
  }
  return out;
}

}  // namespace psflow
