// Who may call what on a parameter server (docs/operations.md,
// "Security"): the role sets its control and bulk services check every
// call against.
#ifndef PSFLOW_PS_PS_CALL_ROLES_H_
#define PSFLOW_PS_PS_CALL_ROLES_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/rpc/claimed_worker.h"
#include "common/rpc/rpc_role.h"
#include "proto/ps.pb.h"

namespace psflow {

// The chief (which may also train: worker 0 without a chief job).
inline const RoleSet kChiefOnly{RpcRole::kChief};
// Pushers: whoever trains.
inline const RoleSet kTrainers{RpcRole::kChief, RpcRole::kWorker};
// Pullers: trainers and the evaluator.
inline const RoleSet kReaders{RpcRole::kChief, RpcRole::kWorker,
                              RpcRole::kEvaluator};
// Read-only questions: every role of the job.
inline const RoleSet kAnyCaller{RpcRole::kChief, RpcRole::kWorker,
                                RpcRole::kEvaluator, RpcRole::kAdmin};

// Whether a pull trains, and so is for kTrainers only: it moves a
// worker's clock (BOUNDED mode) or, for rows, creates and marks rows
// (`train`). A plain read, such as the evaluator's, is any reader's.
inline bool Trains(const PullBatchRequest& request) {
  return request.has_worker_clock();
}
inline bool Trains(const PullRowsRequest& request) {
  return request.train() || request.has_worker_clock();
}

// The worker each request speaks for is the caller's own when its
// certificate names one (common/rpc/claimed_worker.h).
inline absl::Status CheckClaimedWorker(absl::string_view caller,
                                       const PullBatchRequest& request) {
  if (!request.has_worker_clock()) return absl::OkStatus();
  return CheckClaimedWorker(caller, request.worker_clock().worker_index());
}
inline absl::Status CheckClaimedWorker(absl::string_view caller,
                                       const PushBatchRequest& request) {
  if (absl::Status own = CheckClaimedWorker(caller, request.worker_index());
      !own.ok()) {
    return own;
  }
  return CheckClaimedWorker(caller, request.then_pull());
}
inline absl::Status CheckClaimedWorker(absl::string_view caller,
                                       const PullRowsRequest& request) {
  if (!request.has_worker_clock()) return absl::OkStatus();
  return CheckClaimedWorker(caller, request.worker_clock().worker_index());
}
inline absl::Status CheckClaimedWorker(absl::string_view caller,
                                       const PushRowsRequest& request) {
  return CheckClaimedWorker(caller, request.worker_index());
}

}  // namespace psflow

#endif  // PSFLOW_PS_PS_CALL_ROLES_H_
