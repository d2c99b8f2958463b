#include "common/rpc/health_server.h"

#include <memory>

#include "grpcpp/generic/async_generic_service.h"

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

absl::StatusOr<std::unique_ptr<ServerRunner>> StartHealthServer(
    const std::string& listen_address, const TransportSecurity& security) {
  // A callback service serves one server only: each gets its own.
  auto unimplemented = std::make_shared<UnimplementedService>();
  ServerOptions options;
  options.listen_address = listen_address;
  options.what = "health checks";
  options.security = security;
  options.generic_service = unimplemented.get();
  options.owned = unimplemented;
  return ServerRunner::Start(options);
}

}  // namespace psflow
