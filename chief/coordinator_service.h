// Serves a JobCoordinator over gRPC (psflow.Coordinator) together with
// grpc.health.v1, on the chief's TF_CONFIG address. While it serves, the
// coordinator holds long polls (job_coordinator.h); the server answers
// them before it stops. The coordinator must outlive the server.
#ifndef PSFLOW_CHIEF_COORDINATOR_SERVICE_H_
#define PSFLOW_CHIEF_COORDINATOR_SERVICE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "chief/job_coordinator.h"
#include "common/rpc/server_runner.h"
#include "common/rpc/transport_security.h"
#include "proto/coordinator.grpc.pb.h"

namespace psflow {

class CoordinatorServer {
 public:
  // Listens on `listen_address` (port 0 picks one). Unavailable when the
  // port is taken.
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(
      const std::string& listen_address, const TransportSecurity& security,
      JobCoordinator* coordinator);
  ~CoordinatorServer();

  int port() const { return server_->port(); }

  // Stops serving: answers the calls the coordinator holds (long polls),
  // then lets in-flight calls finish for up to `grace`. Idempotent; not
  // from a handler.
  void Stop(absl::Duration grace);

 private:
  class Service;
  CoordinatorServer() = default;
  JobCoordinator* coordinator_ = nullptr;
  std::unique_ptr<Service> service_;
  std::unique_ptr<ServerRunner> server_;
};

}  // namespace psflow

#endif  // PSFLOW_CHIEF_COORDINATOR_SERVICE_H_
