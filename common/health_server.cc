#include "common/health_server.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace psflow {
namespace {

// gRPC 1.51 refuses to build a server whose only service is the default
// health service ("at least one of the completion queues must be
// frequently polled"); a callback service makes it a callback server.
// This one answers every other method with UNIMPLEMENTED.
class UnimplementedService final : public grpc::CallbackGenericService {
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    class Reactor final : public grpc::ServerGenericBidiReactor {
     public:
      explicit Reactor(const std::string& method) {
        Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                            method + " is not served by this task"));
      }
      void OnDone() override { delete this; }
    };
    return new Reactor(context->method());
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<grpc::Server>> StartHealthServer(
    const std::string& listen_address) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Lives as long as the process: servers may outlive their callers' scope.
  static auto* const unimplemented = new UnimplementedService;
  builder.RegisterCallbackGenericService(unimplemented);
  int port = 0;
  builder.AddListeningPort(listen_address, grpc::InsecureServerCredentials(),
                           &port);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", listen_address,
        " for health checks: the port is in use or the address is not "
        "local"));
  }
  return server;
}

}  // namespace psflow
