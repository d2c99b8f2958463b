#include "common/rpc/channel.h"

#include "grpcpp/create_channel.h"

namespace psflow {

std::shared_ptr<grpc::Channel> OpenChannel(const std::string& address,
                                           const TransportSecurity& security,
                                           const grpc::ChannelArguments& args) {
  return grpc::CreateCustomChannel(address, ChannelCredentialsFor(security),
                                   args);
}

}  // namespace psflow
