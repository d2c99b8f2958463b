// Connects a role to the parameter servers that its TF_CONFIG lists.
#ifndef PSFLOW_CLIENT_CLUSTER_CLIENT_H_
#define PSFLOW_CLIENT_CLUSTER_CLIENT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "client/ps_client.h"
#include "common/job/placement.h"
#include "common/rpc/transport_security.h"
#include "common/tf_config.h"
#include "proto/coordinator.pb.h"

namespace psflow {

// One GrpcPsShard per "ps" task, named "ps-<i> at <address>" in errors.
std::unique_ptr<ParameterClient> ConnectToParameterServers(
    const TfConfig& config, const Placement& placement,
    const ParameterClient::Options& options, const TransportSecurity& security);

// For workers and the evaluator: connects with the placement the chief
// published in `spec` and configures the servers with the job's update rule
// (idempotent, so every role may do it).
absl::StatusOr<std::unique_ptr<ParameterClient>> ConnectToJobParameterServers(
    const TfConfig& config, const JobSpec& spec,
    const TransportSecurity& security);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_CLUSTER_CLIENT_H_
