#include "common/rpc/channel.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/client_interceptor.h"

namespace psflow {
namespace {

// Adds the job token to every call's initial metadata. (gRPC's call
// credentials would do it only on TLS channels; this works on both.)
class TokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(std::shared_ptr<const std::string> value)
      : value_(std::move(value)) {}

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kTokenMetadataKey, *value_);
    }
    methods->Proceed();
  }

 private:
  const std::shared_ptr<const std::string> value_;
};

class TokenInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(const std::string& token)
      : value_(std::make_shared<const std::string>(
            absl::StrCat(kTokenScheme, token))) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(value_);
  }

 private:
  const std::shared_ptr<const std::string> value_;
};

}  // namespace

std::shared_ptr<grpc::Channel> OpenChannel(const std::string& address,
                                           const TransportSecurity& security,
                                           const grpc::ChannelArguments& args) {
  if (!security.tokens.presents()) {
    return grpc::CreateCustomChannel(address, ChannelCredentialsFor(security),
                                     args);
  }
  std::vector<
      std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(
      std::make_unique<TokenInterceptorFactory>(security.tokens.own));
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      address, ChannelCredentialsFor(security), args, std::move(interceptors));
}

}  // namespace psflow
