// A gRPC server that only answers grpc.health.v1 (SERVING): what workers
// and the evaluator run on their TF_CONFIG port so Kubernetes probes and
// operators can check them.
#ifndef PSFLOW_COMMON_HEALTH_SERVER_H_
#define PSFLOW_COMMON_HEALTH_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/server.h"

namespace psflow {

// Unavailable when `listen_address` cannot be bound.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartHealthServer(
    const std::string& listen_address);

}  // namespace psflow

#endif  // PSFLOW_COMMON_HEALTH_SERVER_H_
