// Under mutual TLS a worker's certificate names its task ("worker-3"):
// the worker a call speaks for (the pusher's worker_index, a worker
// clock, a registration's or a progress report's index) must be that one,
// so that one worker can neither fill another's share of a sync step,
// move another's clock, nor report for another. Callers named otherwise
// are not checked here: a job token names only a role, and the chief's or
// psctl's certificate was checked by its role.
#ifndef PSFLOW_COMMON_RPC_CLAIMED_WORKER_H_
#define PSFLOW_COMMON_RPC_CLAIMED_WORKER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace psflow {

// `caller`: CallAuthorizer::Caller::name. PERMISSION_DENIED naming both
// when a certified worker speaks for another.
inline absl::Status CheckClaimedWorker(absl::string_view caller,
                                       int64_t worker_index) {
  if (!absl::ConsumePrefix(&caller, "worker-")) return absl::OkStatus();
  int64_t certified = 0;
  if (!absl::SimpleAtoi(caller, &certified)) return absl::OkStatus();
  if (certified == worker_index) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat("the caller's certificate names worker-", certified,
                   ", but the call speaks for worker ", worker_index,
                   "; a worker calls as itself only"));
}

}  // namespace psflow

#endif  // PSFLOW_COMMON_RPC_CLAIMED_WORKER_H_
