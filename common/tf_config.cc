#include "common/tf_config.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/host_port.h"
#include "common/json.h"
#include "common/status_macros.h"

namespace psflow {
namespace {

using Kind = JsonValue::Kind;

// Far above any real cluster; keeps index arithmetic away from overflow.
constexpr int kMaxTaskIndex = 1 << 20;

constexpr absl::string_view kExampleTask =
    "\"task\": {\"type\": \"worker\", \"index\": 0}";

constexpr absl::string_view kNoChief =
    "\"cluster\" has no \"chief\" task and no worker with index 0 (which "
    "leads a job that has no chief); add a \"chief\" task, or give one "
    "worker index 0";

absl::Status Error(absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("TF_CONFIG: ", message));
}

std::string TaskKey(const TaskId& task) {
  return absl::StrCat("cluster.", TaskTypeName(task.type), "[", task.index,
                      "]");
}

absl::StatusOr<int> ParseIndex(const JsonValue& value, absl::string_view key) {
  const std::string fix = absl::StrCat("; use a whole number from 0 to ",
                                       kMaxTaskIndex, ", e.g. 0");
  if (value.kind() == Kind::kNumber) {
    double d = value.number_value();
    if (d < 0 || d > kMaxTaskIndex || std::floor(d) != d) {
      return Error(absl::StrCat(key, " is ", value.Describe(), fix));
    }
    return static_cast<int>(d);
  }
  if (value.kind() == Kind::kString) {
    // TensorFlow accepts "1" as well as 1 (it calls int() on it).
    const std::string& s = value.string_value();
    int parsed = 0;
    bool digits = !s.empty() && s.size() <= 8 &&
                  std::all_of(s.begin(), s.end(), absl::ascii_isdigit);
    if (!digits || !absl::SimpleAtoi(s, &parsed) || parsed > kMaxTaskIndex) {
      return Error(absl::StrCat(key, " is ", value.Describe(), fix));
    }
    return parsed;
  }
  return Error(absl::StrCat(key, " is ", value.Describe(), fix));
}

absl::StatusOr<TaskType> ParseJobName(absl::string_view name,
                                      absl::string_view key) {
  std::optional<TaskType> type = ParseTaskType(name);
  if (type.has_value()) return *type;
  std::string hint;
  if (name == "master") {
    hint = " (TensorFlow 1's \"master\" is called \"chief\" now)";
  } else if (ParseTaskType(absl::AsciiStrToLower(name)).has_value()) {
    hint = " (job names are lower case)";
  }
  return Error(absl::StrCat(key, " \"", name, "\" is not a job psflow runs",
                            hint, "; use chief, ps, worker or evaluator"));
}

absl::StatusOr<ClusterSpec::Job> ParseJob(absl::string_view name,
                                          const JsonValue& value) {
  const std::string key = absl::StrCat("cluster.", name);
  ClusterSpec::Job job;
  if (value.kind() == Kind::kArray) {
    const auto& items = value.array();
    for (int i = 0; i < static_cast<int>(items.size()); ++i) {
      if (items[i].kind() != Kind::kString) {
        return Error(absl::StrCat(key, "[", i, "] is ", items[i].Describe(),
                                  "; each task is a \"host:port\" string"));
      }
      job[i] = items[i].string_value();
    }
    return job;
  }
  if (value.kind() == Kind::kObject) {
    // TensorFlow's sparse form: {"0": "host:port", "3": "host:port"}.
    for (const auto& [index_text, address] : value.object()) {
      ASSIGN_OR_RETURN(int index,
                       ParseIndex(JsonValue(index_text),
                                  absl::StrCat("task index in ", key)));
      if (address.kind() != Kind::kString) {
        return Error(absl::StrCat(key, "[\"", index_text, "\"] is ",
                                  address.Describe(),
                                  "; each task is a \"host:port\" string"));
      }
      if (!job.emplace(index, address.string_value()).second) {
        return Error(absl::StrCat(key, " lists task index ", index,
                                  " twice; give each index once"));
      }
    }
    return job;
  }
  return Error(absl::StrCat(key, " is ", value.Describe(),
                            "; give a list of \"host:port\" strings, e.g. [\"",
                            name, "-0.example.com:2222\"]"));
}

absl::StatusOr<std::string> OptionalString(const JsonValue& object,
                                           absl::string_view key) {
  const JsonValue* value = object.Find(key);
  if (value == nullptr || value->is_null()) return std::string();
  if (value->kind() != Kind::kString) {
    return Error(
        absl::StrCat(key, " is ", value->Describe(), "; it must be a string"));
  }
  return value->string_value();
}

absl::Status ParseCluster(const JsonValue& value, TfConfig& config) {
  if (value.kind() != Kind::kObject) {
    return Error(
        absl::StrCat("\"cluster\" is ", value.Describe(),
                     "; it must map job names to address lists, e.g. {\"ps\": "
                     "[\"ps-0:2222\"], \"worker\": [\"worker-0:2222\"]}"));
  }
  std::map<TaskType, ClusterSpec::Job> jobs;
  for (const auto& [name, job_value] : value.object()) {
    ASSIGN_OR_RETURN(TaskType type,
                     ParseJobName(name, "job name in \"cluster\""));
    ASSIGN_OR_RETURN(ClusterSpec::Job job, ParseJob(name, job_value));
    if (job.empty()) {
      config.warnings.push_back(
          absl::StrCat("cluster.", name, " has no tasks; treated as absent"));
    }
    jobs[type] = std::move(job);
  }
  config.cluster = ClusterSpec(std::move(jobs));
  return absl::OkStatus();
}

absl::Status ParseTask(const JsonValue& root, TfConfig& config) {
  const JsonValue* task = root.Find("task");
  if (task == nullptr || task->is_null()) {
    return Error(absl::StrCat(
        "has no \"task\": every psflow process needs to know its role; add ",
        kExampleTask));
  }
  if (task->kind() != Kind::kObject) {
    return Error(absl::StrCat("\"task\" is ", task->Describe(),
                              "; it must be an object like {", kExampleTask,
                              "}"));
  }
  const JsonValue* type = task->Find("type");
  if (type == nullptr) {
    return Error(
        absl::StrCat("task.type is missing; add it, e.g. ", kExampleTask));
  }
  if (type->kind() != Kind::kString) {
    return Error(absl::StrCat("task.type is ", type->Describe(),
                              "; use one of \"chief\", \"ps\", \"worker\", "
                              "\"evaluator\""));
  }
  ASSIGN_OR_RETURN(config.task.type,
                   ParseJobName(type->string_value(), "task.type"));
  // TensorFlow defaults a missing index to 0.
  const JsonValue* index = task->Find("index");
  config.task.index = 0;
  if (index != nullptr) {
    ASSIGN_OR_RETURN(config.task.index, ParseIndex(*index, "task.index"));
  }
  if (const JsonValue* trial_value = task->Find("trial")) {
    const JsonValue& trial = *trial_value;
    if (trial.kind() == Kind::kString) {
      config.trial = trial.string_value();
    } else if (trial.kind() == Kind::kNumber) {
      config.trial = absl::StrCat(trial.number_value());
    } else if (trial.kind() != Kind::kNull) {
      return Error(absl::StrCat("task.trial is ", trial.Describe(),
                                "; it must be a string or a number"));
    }
  }
  for (const auto& [key, unused] : task->object()) {
    if (key != "type" && key != "index" && key != "trial") {
      config.warnings.push_back(
          absl::StrCat("task.", key, " is not a TF_CONFIG key; ignored"));
    }
  }
  return absl::OkStatus();
}

// TensorFlow's cluster rules, then the checks that TF skips.
absl::Status Validate(const TfConfig& config) {
  const ClusterSpec& cluster = config.cluster;
  const TaskId& task = config.task;
  const std::string type_name(TaskTypeName(task.type));

  for (TaskType single : {TaskType::kChief, TaskType::kEvaluator}) {
    if (cluster.NumTasks(single) > 1) {
      return Error(absl::StrCat(
          "cluster.", TaskTypeName(single), " has ", cluster.NumTasks(single),
          " tasks; there can be at most one ", TaskTypeName(single)));
    }
  }

  if (!cluster.HasJob(task.type)) {
    if (task.type != TaskType::kEvaluator) {
      return Error(absl::StrCat("task.type is \"", type_name,
                                "\" but \"cluster\" has no \"", type_name,
                                "\" job; add it to \"cluster\" or fix "
                                "task.type"));
    }
  } else if (!cluster.Address(task).has_value()) {
    const ClusterSpec::Job& job = cluster.job(task.type);
    std::vector<int> indexes;
    for (const auto& [index, unused] : job) indexes.push_back(index);
    std::string valid =
        cluster.IsSparse(task.type)
            ? absl::StrCat("one of ", absl::StrJoin(indexes, ", "))
            : absl::StrCat("0..", job.size() - 1);
    return Error(absl::StrCat("task.index ", task.index,
                              " is out of range for job \"", type_name, "\" (",
                              job.size(), job.size() == 1 ? " task" : " tasks",
                              "); use ", valid));
  }

  if (task.type != TaskType::kEvaluator) {
    for (TaskType needed : {TaskType::kPs, TaskType::kWorker}) {
      if (!cluster.HasJob(needed)) {
        const std::string name(TaskTypeName(needed));
        return Error(absl::StrCat("\"cluster\" has no \"", name,
                                  "\" tasks; training needs at "
                                  "least one ps and one worker: add e.g. \"",
                                  name, "\": [\"", name,
                                  "-0.example.com:2222\"]"));
      }
    }
  }

  // Every training task talks to the chief, so the chief must exist (an
  // evaluator's TF_CONFIG may leave the cluster out; its binary checks).
  if (task.type != TaskType::kEvaluator) {
    if (absl::StatusOr<std::string> chief = config.ChiefAddress();
        !chief.ok()) {
      return Error(kNoChief);
    }
  }

  std::map<std::string, TaskId> seen;  // Normalized address -> first task.
  for (const auto& [peer, address] : cluster.Tasks()) {
    absl::StatusOr<HostPort> parsed = ParseHostPort(address);
    if (!parsed.ok()) {
      return Error(absl::StrCat(TaskKey(peer), " ", parsed.status().message()));
    }
    if (parsed->port == 0 && peer != task) {
      return Error(absl::StrCat(
          TaskKey(peer), " \"", address,
          "\" has port 0, which peers cannot dial; give the port that task "
          "listens on (port 0 is allowed only in a task's own entry)"));
    }
    HostPort normalized = *parsed;
    normalized.host = absl::AsciiStrToLower(normalized.host);
    auto [it, inserted] = seen.emplace(normalized.ToString(), peer);
    if (!inserted) {
      return Error(absl::StrCat(TaskKey(peer), " and ", TaskKey(it->second),
                                " share address \"", address,
                                "\"; every task needs its own host:port"));
    }
  }

  if (!config.rpc_layer.empty() && config.rpc_layer != "grpc" &&
      config.rpc_layer != "grpc+tls") {
    return Error(absl::StrCat(
        "rpc_layer \"", config.rpc_layer,
        "\" is not supported; psflow speaks gRPC: use \"grpc\" (TLS when "
        "the task has credentials), \"grpc+tls\" (TLS required) or leave "
        "rpc_layer out"));
  }
  return absl::OkStatus();
}

}  // namespace

TaskId TfConfig::ChiefTask() const {
  if (cluster.HasJob(TaskType::kChief)) {
    return TaskId{TaskType::kChief,
                  cluster.job(TaskType::kChief).begin()->first};
  }
  return TaskId{TaskType::kWorker, 0};
}

absl::StatusOr<std::string> TfConfig::ChiefAddress() const {
  std::optional<std::string> address = cluster.Address(ChiefTask());
  if (address.has_value()) return *std::move(address);
  return absl::FailedPreconditionError(
      absl::StrCat("TF_CONFIG names no chief: ", kNoChief));
}

bool TfConfig::IsChief() const { return task == ChiefTask(); }

std::optional<std::string> TfConfig::TaskAddress() const {
  return cluster.Address(task);
}

absl::StatusOr<TfConfig> ParseTfConfig(absl::string_view json) {
  if (absl::StripAsciiWhitespace(json).empty()) {
    return Error(
        "is empty; set it to a JSON object like {\"cluster\": {...}, "
        "\"task\": {...}}");
  }
  absl::StatusOr<JsonValue> parsed = ParseJson(json);
  if (!parsed.ok()) {
    return Error(
        absl::StrCat("is not valid JSON: ", parsed.status().message()));
  }
  const JsonValue& root = *parsed;
  if (root.kind() != Kind::kObject) {
    return Error(absl::StrCat(
        "is ", root.Describe(),
        "; it must be a JSON object like {\"cluster\": {...}, \"task\": "
        "{...}}"));
  }

  TfConfig config;
  for (const auto& [key, unused] : root.object()) {
    if (key != "cluster" && key != "task" && key != "rpc_layer" &&
        key != "environment" && key != "session_master") {
      config.warnings.push_back(
          absl::StrCat("\"", key, "\" is not a TF_CONFIG key; ignored"));
    }
  }
  const JsonValue* cluster = root.Find("cluster");
  if (cluster != nullptr && !cluster->is_null()) {
    RETURN_IF_ERROR(ParseCluster(*cluster, config));
  }
  RETURN_IF_ERROR(ParseTask(root, config));
  ASSIGN_OR_RETURN(config.rpc_layer, OptionalString(root, "rpc_layer"));
  ASSIGN_OR_RETURN(config.environment, OptionalString(root, "environment"));
  ASSIGN_OR_RETURN(config.session_master,
                   OptionalString(root, "session_master"));
  RETURN_IF_ERROR(Validate(config));
  return config;
}

}  // namespace psflow
