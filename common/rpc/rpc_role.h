// Who may call what: the roles of psflow's callers, and which role a task
// of the cluster plays (common/rpc/call_authorizer.h checks them).
//
//   chief      the job's coordinator (the "chief" task, or worker 0 when
//              TF_CONFIG has no chief job: that process trains too, so
//              the chief may do everything a worker may)
//   worker     trains: pulls and pushes
//   evaluator  pulls and reports metrics
//   ps         a parameter server (calls nobody)
//   admin      an operator's tool (psctl status, psctl ckpt restore)
#ifndef PSFLOW_COMMON_RPC_RPC_ROLE_H_
#define PSFLOW_COMMON_RPC_RPC_ROLE_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "common/task.h"

namespace psflow {

enum class RpcRole { kChief, kWorker, kEvaluator, kPs, kAdmin };

inline constexpr RpcRole kAllRpcRoles[] = {RpcRole::kChief, RpcRole::kWorker,
                                           RpcRole::kEvaluator, RpcRole::kPs,
                                           RpcRole::kAdmin};

// "chief", "worker", "evaluator", "ps", "admin": also the names of the
// token files (<role>.token).
absl::string_view RpcRoleName(RpcRole role);
std::optional<RpcRole> ParseRpcRole(absl::string_view name);

// The role of `task` in a cluster whose chief is `chief_task`.
RpcRole RoleOfTask(const TaskId& task, const TaskId& chief_task);

// The role a certificate's common name stands for: a task name
// ("worker-1", see TaskId::ToString) or "psctl" (admin); nullopt for
// anything else.
std::optional<RpcRole> RoleOfCertificateName(absl::string_view common_name,
                                             const TaskId& chief_task);

// A set of roles.
class RoleSet {
 public:
  RoleSet(std::initializer_list<RpcRole> roles) {
    for (RpcRole role : roles) bits_ |= Bit(role);
  }
  bool Contains(RpcRole role) const { return (bits_ & Bit(role)) != 0; }
  // "the chief or a worker".
  std::string Describe() const;

 private:
  static uint32_t Bit(RpcRole role) {
    return uint32_t{1} << static_cast<int>(role);
  }
  uint32_t bits_ = 0;
};

}  // namespace psflow

#endif  // PSFLOW_COMMON_RPC_RPC_ROLE_H_
