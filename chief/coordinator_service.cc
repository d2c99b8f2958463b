#include "chief/coordinator_service.h"

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_status.h"
#include "common/status_macros.h"

namespace psflow {

class CoordinatorServer::Service final : public Coordinator::CallbackService {
 public:
  explicit Service(JobCoordinator* coordinator) : coordinator_(coordinator) {}

  grpc::ServerUnaryReactor* RegisterTask(
      grpc::CallbackServerContext* context, const RegisterTaskRequest* request,
      RegisterTaskResponse* response) override {
    absl::StatusOr<JobSpec> spec = coordinator_->Register(*request);
    if (spec.ok()) *response->mutable_spec() = *std::move(spec);
    return Done(context, spec.status());
  }

  grpc::ServerUnaryReactor* ReportProgress(grpc::CallbackServerContext* context,
                                           const ProgressReport* report,
                                           StatusResponse* response) override {
    *response = coordinator_->Progress(*report);
    return Done(context, absl::OkStatus());
  }

  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const StatusRequest* request,
                                      StatusResponse* response) override {
    *response = coordinator_->Status(*request);
    return Done(context, absl::OkStatus());
  }

  grpc::ServerUnaryReactor* DescribeJob(grpc::CallbackServerContext* context,
                                        const DescribeJobRequest*,
                                        JobDescription* response) override {
    *response = coordinator_->Describe();
    return Done(context, absl::OkStatus());
  }

  grpc::ServerUnaryReactor* ReportEvaluation(
      grpc::CallbackServerContext* context, const EvaluationReport* report,
      EvaluationAck*) override {
    coordinator_->Evaluation(*report);
    return Done(context, absl::OkStatus());
  }

 private:
  grpc::ServerUnaryReactor* RestoreCheckpoint(
      grpc::CallbackServerContext* context,
      const RestoreCheckpointRequest* request,
      RestoreCheckpointResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    // The chief's main loop runs it (it owns the parameter server client)
    // and answers through `done`.
    coordinator_->RequestRestore(JobCoordinator::RestoreRequest{
        request->path(), [reactor, response](absl::StatusOr<int64_t> step) {
          if (step.ok()) response->set_global_step(*step);
          reactor->Finish(ToGrpcStatus(step.status()));
        }});
    return reactor;
  }

  static grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context,
                                        const absl::Status& status) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }

  JobCoordinator* const coordinator_;
};

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    const std::string& listen_address, const TransportSecurity& security,
    JobCoordinator* coordinator) {
  std::unique_ptr<CoordinatorServer> server(new CoordinatorServer);
  server->service_ = std::make_unique<Service>(coordinator);
  ServerOptions options;
  options.listen_address = listen_address;
  options.what = "coordinator";
  options.security = security;
  options.services = {server->service_.get()};
  ASSIGN_OR_RETURN(server->server_, ServerRunner::Start(options));
  return server;
}

// The runner drains (one second of grace) when it goes; the service it
// serves goes after it.
CoordinatorServer::~CoordinatorServer() { server_.reset(); }

}  // namespace psflow
