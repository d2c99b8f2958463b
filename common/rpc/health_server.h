// A gRPC server that only answers grpc.health.v1 (SERVING): what workers
// and the evaluator run on their TF_CONFIG port so Kubernetes probes and
// operators can check them. Every other method is UNIMPLEMENTED.
#ifndef PSFLOW_COMMON_RPC_HEALTH_SERVER_H_
#define PSFLOW_COMMON_RPC_HEALTH_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/rpc/server_runner.h"
#include "common/rpc/transport_security.h"

namespace psflow {

// Unavailable when `listen_address` cannot be bound.
absl::StatusOr<std::unique_ptr<ServerRunner>> StartHealthServer(
    const std::string& listen_address, const TransportSecurity& security);

}  // namespace psflow

#endif  // PSFLOW_COMMON_RPC_HEALTH_SERVER_H_
