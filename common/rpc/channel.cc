#include "common/rpc/channel.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpc/grpc.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/client_interceptor.h"

namespace psflow {
namespace {

// Adds fixed pairs (the job token, the chief's incarnation) to every
// call's initial metadata. (gRPC's call credentials would do it only on TLS
// channels; this works on both.)
using Metadata = std::vector<std::pair<std::string, std::string>>;

class MetadataInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit MetadataInterceptor(std::shared_ptr<const Metadata> metadata)
      : metadata_(std::move(metadata)) {}

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      for (const auto& [key, value] : *metadata_) {
        methods->GetSendInitialMetadata()->emplace(key, value);
      }
    }
    methods->Proceed();
  }

 private:
  const std::shared_ptr<const Metadata> metadata_;
};

class MetadataInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit MetadataInterceptorFactory(Metadata metadata)
      : metadata_(std::make_shared<const Metadata>(std::move(metadata))) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new MetadataInterceptor(metadata_);
  }

 private:
  const std::shared_ptr<const Metadata> metadata_;
};

}  // namespace

std::shared_ptr<grpc::Channel> OpenChannel(
    const std::string& address, const TransportSecurity& security,
    const grpc::ChannelArguments& caller_args,
    const std::string& expected_peer) {
  // gRPC's reconnect backoff grows to 2 minutes by default: a task that
  // tried its peer before the peer was up (a worker starting before the
  // chief) or while it restarted would then find it up to minutes late,
  // after the job ended or a recovery window closed. Inside one job's
  // cluster, at most a second between tries. (Not the *minimum* backoff:
  // gRPC 1.51 also takes it as the connect timeout, so 100 ms there failed
  // every connection whose TLS handshake took longer, on a loaded host.)
  grpc::ChannelArguments args = caller_args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  Metadata metadata;
  if (security.tokens.presents()) {
    metadata.emplace_back(kTokenMetadataKey,
                          absl::StrCat(kTokenScheme, security.tokens.own));
  }
  if (!security.chief_incarnation.empty()) {
    metadata.emplace_back(kChiefIncarnationMetadataKey,
                          security.chief_incarnation);
  }
  if (metadata.empty()) {
    return grpc::CreateCustomChannel(
        address, ChannelCredentialsFor(security, expected_peer), args);
  }
  std::vector<
      std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(
      std::make_unique<MetadataInterceptorFactory>(std::move(metadata)));
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      address, ChannelCredentialsFor(security, expected_peer), args,
      std::move(interceptors));
}

}  // namespace psflow
