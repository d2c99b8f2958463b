#include "common/rpc/rpc_role.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psflow {

absl::string_view RpcRoleName(RpcRole role) {
  switch (role) {
    case RpcRole::kChief:
      return "chief";
    case RpcRole::kWorker:
      return "worker";
    case RpcRole::kEvaluator:
      return "evaluator";
    case RpcRole::kPs:
      return "ps";
    case RpcRole::kAdmin:
      return "admin";
  }
  return "unknown";
}

std::optional<RpcRole> ParseRpcRole(absl::string_view name) {
  for (RpcRole role : kAllRpcRoles) {
    if (RpcRoleName(role) == name) return role;
  }
  return std::nullopt;
}

RpcRole RoleOfTask(const TaskId& task, const TaskId& chief_task) {
  if (task == chief_task) return RpcRole::kChief;
  switch (task.type) {
    case TaskType::kChief:
      return RpcRole::kChief;
    case TaskType::kPs:
      return RpcRole::kPs;
    case TaskType::kWorker:
      return RpcRole::kWorker;
    case TaskType::kEvaluator:
      return RpcRole::kEvaluator;
  }
  return RpcRole::kWorker;
}

std::optional<RpcRole> RoleOfCertificateName(absl::string_view common_name,
                                             const TaskId& chief_task) {
  if (common_name == "psctl") return RpcRole::kAdmin;
  std::optional<TaskId> task = ParseTaskName(common_name);
  if (!task.has_value()) return std::nullopt;
  return RoleOfTask(*task, chief_task);
}

std::string RoleSet::Describe() const {
  std::vector<std::string> names;
  for (RpcRole role : kAllRpcRoles) {
    if (!Contains(role)) continue;
    switch (role) {
      case RpcRole::kChief:
        names.push_back("the chief");
        break;
      case RpcRole::kWorker:
        names.push_back("a worker");
        break;
      case RpcRole::kEvaluator:
        names.push_back("an evaluator");
        break;
      case RpcRole::kPs:
        names.push_back("a parameter server");
        break;
      case RpcRole::kAdmin:
        names.push_back("an admin tool (psctl)");
        break;
    }
  }
  if (names.empty()) return "nobody";
  if (names.size() == 1) return names[0];
  const std::string last = names.back();
  names.pop_back();
  return absl::StrCat(absl::StrJoin(names, ", "), " or ", last);
}

}  // namespace psflow
