// The one place where absl::Status and grpc::Status convert into each
// other. Codes map one to one (both follow google.rpc.Code).
#ifndef PSFLOW_COMMON_RPC_GRPC_STATUS_H_
#define PSFLOW_COMMON_RPC_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace psflow {

grpc::Status ToGrpcStatus(const absl::Status& status);

// `context` (e.g. "pull from ps-1 at 10.0.0.3:2222") is prefixed to the
// message so errors name the peer.
absl::Status FromGrpcStatus(const grpc::Status& status,
                            absl::string_view context = "");

}  // namespace psflow

#endif  // PSFLOW_COMMON_RPC_GRPC_STATUS_H_
