// Connects a role to the parameter servers that its TF_CONFIG lists.
#ifndef PSFLOW_CLIENT_CLUSTER_CLIENT_H_
#define PSFLOW_CLIENT_CLUSTER_CLIENT_H_

#include <memory>

#include "client/placement.h"
#include "client/ps_client.h"
#include "common/tf_config.h"

namespace psflow {

// One GrpcPsShard per "ps" task, named "ps-<i> at <address>" in errors.
std::unique_ptr<ParameterClient> ConnectToParameterServers(
    const TfConfig& config, const Placement& placement,
    const ParameterClient::Options& options);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_CLUSTER_CLIENT_H_
