// Connects a role to the parameter servers that its TF_CONFIG lists.
#ifndef PSFLOW_CLIENT_CLUSTER_CLIENT_H_
#define PSFLOW_CLIENT_CLUSTER_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/grpc_ps_shard.h"
#include "client/ps_client.h"
#include "common/job/placement.h"
#include "common/rpc/transport_security.h"
#include "common/tf_config.h"
#include "proto/coordinator.pb.h"

namespace psflow {

// Shared memory a client offers each parameter server on its host; 0 keeps
// every call on TCP. Pages are only touched as calls use them, so this is
// an upper bound, best about GrpcPsShard::Options::max_in_flight_bytes.
inline constexpr int64_t kDefaultSharedMemoryBytes = int64_t{64} << 20;
// A worker's tensors kept in that memory (ParameterClient::AllocateShared):
// two sets of parameters and two of gradients. ConnectToParameterServers
// adds room for them to each server's region.
inline constexpr int64_t kSharedTensorSets = 4;

// A connection to one parameter server: the gRPC transport, behind the
// shared-memory decorator unless `shared_memory_bytes` is 0. `name` is used
// in errors ("ps-1 at 10.0.0.3:2222").
std::unique_ptr<PsShard> ConnectPsShard(
    const std::string& address, std::string name,
    const GrpcPsShard::Options& options,
    int64_t shared_memory_bytes = kDefaultSharedMemoryBytes);

// One connection per "ps" task, named "ps-<i> at <address>" in errors.
std::unique_ptr<ParameterClient> ConnectToParameterServers(
    const TfConfig& config, const Placement& placement,
    const ParameterClient::Options& options, const TransportSecurity& security);

// For workers and the evaluator: connects with the placement the chief
// published in `spec` and configures the servers with the job's update rule
// (idempotent, so every role may do it).
absl::StatusOr<std::unique_ptr<ParameterClient>> ConnectToJobParameterServers(
    const TfConfig& config, const JobSpec& spec,
    const TransportSecurity& security);

// OK when this task's TF_CONFIG lists the same parameter servers as the
// chief's (and, for a worker, the same workers), in the same order, as
// `spec` records them; FailedPrecondition naming both lists otherwise.
// PlaceJobOnParameterServers checks it first.
absl::Status CheckSameCluster(const TfConfig& config, const JobSpec& spec);

// The same connection, not configured yet: for a task that arms its
// job-end hook (ParameterClient::CancelInFlight) before the Configure call,
// which waits for servers that may be gone when the job ended early.
absl::StatusOr<std::unique_ptr<ParameterClient>> PlaceJobOnParameterServers(
    const TfConfig& config, const JobSpec& spec,
    const TransportSecurity& security);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_CLUSTER_CLIENT_H_
