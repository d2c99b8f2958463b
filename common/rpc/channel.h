// Opening a gRPC channel to a psflow task, with the job's transport
// security (transport_security.h). Every client (parameter-server shards,
// the coordinator client, health probes) opens its channels here.
// Thread-safe.
#ifndef PSFLOW_COMMON_RPC_CHANNEL_H_
#define PSFLOW_COMMON_RPC_CHANNEL_H_

#include <memory>
#include <string>

#include "common/rpc/transport_security.h"
#include "grpcpp/channel.h"
#include "grpcpp/support/channel_arguments.h"

namespace psflow {

// A channel to `address` (host:port); connects lazily, and reconnects at
// most a second apart (not gRPC's default of up to 2 minutes). Every call
// on it
// carries `security.tokens.own` when there is one (job_tokens.h), and
// `security.chief_incarnation` when there is one. With mutual TLS and
// `expected_peer` (a task's name: "ps-1"), the server must present that
// task's certificate (ChannelCredentialsFor).
std::shared_ptr<grpc::Channel> OpenChannel(
    const std::string& address, const TransportSecurity& security,
    const grpc::ChannelArguments& args = grpc::ChannelArguments(),
    const std::string& expected_peer = "");

}  // namespace psflow

#endif  // PSFLOW_COMMON_RPC_CHANNEL_H_
