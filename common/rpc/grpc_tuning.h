// gRPC channel arguments for bulk tensor traffic, shared by servers and
// clients so both ends of a connection agree. See bench/RESULTS.md for the
// measurements behind the values.
#ifndef PSFLOW_COMMON_RPC_GRPC_TUNING_H_
#define PSFLOW_COMMON_RPC_GRPC_TUNING_H_

#include <string>
#include <utility>
#include <vector>

namespace psflow {

// (name, value) pairs to set on every psflow channel and server.
std::vector<std::pair<std::string, int>> BulkTransportChannelArgs();

}  // namespace psflow

#endif  // PSFLOW_COMMON_RPC_GRPC_TUNING_H_
