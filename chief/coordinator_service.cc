#include "chief/coordinator_service.h"

#include "absl/strings/str_cat.h"
#include "common/rpc/call_authorizer.h"
#include "common/rpc/claimed_worker.h"
#include "common/rpc/grpc_status.h"
#include "common/rpc/rpc_role.h"
#include "common/status_macros.h"

namespace psflow {

namespace {

constexpr int kMaxCoordinatorRequestBytes = 1 << 20;

// Who may call what (docs/operations.md, "Security"). The chief's own
// process calls as the chief (worker 0 without a chief job trains too).
const RoleSet kTrainers{RpcRole::kChief, RpcRole::kWorker};
const RoleSet kTasks{RpcRole::kChief, RpcRole::kWorker, RpcRole::kEvaluator};
const RoleSet kAnyCaller{RpcRole::kChief, RpcRole::kWorker, RpcRole::kEvaluator,
                         RpcRole::kAdmin};

}  // namespace

class CoordinatorServer::Service final : public Coordinator::CallbackService {
 public:
  Service(JobCoordinator* coordinator, const TransportSecurity& security)
      : coordinator_(coordinator), authorizer_(security) {}

  grpc::ServerUnaryReactor* RegisterTask(
      grpc::CallbackServerContext* context, const RegisterTaskRequest* request,
      RegisterTaskResponse* response) override {
    absl::StatusOr<CallAuthorizer::Caller> caller =
        authorizer_.AuthorizeCaller(*context, kTasks, "RegisterTask");
    if (!caller.ok()) return Done(context, caller.status());
    // A worker registers as a worker and an evaluator as the evaluator;
    // a certified worker as itself.
    if (caller->role.has_value() && *caller->role != RpcRole::kChief &&
        request->task_type() != RpcRoleName(*caller->role)) {
      return Done(context, absl::PermissionDeniedError(
                               absl::StrCat("a ", RpcRoleName(*caller->role),
                                            " cannot register as task type \"",
                                            request->task_type(), "\"")));
    }
    if (request->task_type() == "worker") {
      if (absl::Status own =
              CheckClaimedWorker(caller->name, request->task_index());
          !own.ok()) {
        return Done(context, own);
      }
    }
    absl::StatusOr<JobSpec> spec = coordinator_->Register(*request);
    if (spec.ok()) *response->mutable_spec() = *std::move(spec);
    return Done(context, spec.status());
  }

  grpc::ServerUnaryReactor* ReportProgress(grpc::CallbackServerContext* context,
                                           const ProgressReport* report,
                                           StatusResponse* response) override {
    absl::StatusOr<CallAuthorizer::Caller> caller =
        authorizer_.AuthorizeCaller(*context, kTrainers, "ReportProgress");
    if (!caller.ok()) return Done(context, caller.status());
    if (absl::Status own =
            CheckClaimedWorker(caller->name, report->worker_index());
        !own.ok()) {
      return Done(context, own);
    }
    // A finished worker's report may be held until the job has news for
    // it (a long poll, job_coordinator.h): then the coordinator's holder
    // answers it, as the chief's main loop answers RestoreCheckpoint.
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    coordinator_->ProgressOrHold(
        *report, [reactor, response](const StatusResponse& status) {
          *response = status;
          reactor->Finish(grpc::Status::OK);
        });
    return reactor;
  }

  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const StatusRequest* request,
                                      StatusResponse* response) override {
    if (absl::Status allowed = Allow(*context, kAnyCaller, "GetStatus");
        !allowed.ok()) {
      return Done(context, allowed);
    }
    // The evaluator's may be held until the job's state changes.
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    coordinator_->StatusOrHold(
        *request, [reactor, response](const StatusResponse& status) {
          *response = status;
          reactor->Finish(grpc::Status::OK);
        });
    return reactor;
  }

  grpc::ServerUnaryReactor* DescribeJob(grpc::CallbackServerContext* context,
                                        const DescribeJobRequest*,
                                        JobDescription* response) override {
    if (absl::Status allowed = Allow(*context, kAnyCaller, "DescribeJob");
        !allowed.ok()) {
      return Done(context, allowed);
    }
    *response = coordinator_->Describe();
    return Done(context, absl::OkStatus());
  }

  grpc::ServerUnaryReactor* ReportEvaluation(
      grpc::CallbackServerContext* context, const EvaluationReport* report,
      EvaluationAck*) override {
    if (absl::Status allowed =
            Allow(*context, RoleSet{RpcRole::kEvaluator}, "ReportEvaluation");
        !allowed.ok()) {
      return Done(context, allowed);
    }
    return Done(context, coordinator_->Evaluation(*report));
  }

 private:
  grpc::ServerUnaryReactor* RestoreCheckpoint(
      grpc::CallbackServerContext* context,
      const RestoreCheckpointRequest* request,
      RestoreCheckpointResponse* response) override {
    // An operator's request (psctl ckpt restore).
    if (absl::Status allowed =
            Allow(*context, RoleSet{RpcRole::kAdmin}, "RestoreCheckpoint");
        !allowed.ok()) {
      return Done(context, allowed);
    }
    if (request->path().size() > 4096) {
      return Done(context, absl::InvalidArgumentError(absl::StrCat(
                               "a checkpoint path of ", request->path().size(),
                               " bytes; a path is at most 4096")));
    }
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

  absl::Status Allow(const grpc::ServerContextBase& context,
                     const RoleSet& roles, absl::string_view method) const {
    return authorizer_.Authorize(context, roles, method).status();
  }

  JobCoordinator* const coordinator_;
  const CallAuthorizer authorizer_;
};

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    const std::string& listen_address, const TransportSecurity& security,
    JobCoordinator* coordinator) {
  std::unique_ptr<CoordinatorServer> server(new CoordinatorServer);
  server->coordinator_ = coordinator;
  server->service_ = std::make_unique<Service>(coordinator, security);
  ServerOptions options;
  options.listen_address = listen_address;
  options.what = "coordinator";
  options.security = security;
  // Every request to the chief is small (a progress report, a status
  // question, an evaluation, a checkpoint path); gRPC parses a request
  // before the caller is checked, and a parser multiplies unknown fields
  // about 8 times, so the bound keeps a stranger's call cheap.
  options.max_receive_message_bytes = kMaxCoordinatorRequestBytes;
  options.services = {server->service_.get()};
  ASSIGN_OR_RETURN(server->server_, ServerRunner::Start(options));
  coordinator->StartHolding();
  return server;
}

void CoordinatorServer::Stop(absl::Duration grace) {
  // A held call would hold the drain (it waits for every call to finish)
  // for as long as it is held: answer them first. Calls that come after
  // are answered at once.
  coordinator_->StopHolding();
  server_->Drain(grace);
}

// The runner drains (one second of grace) when it goes; the service it
// serves goes after it.
CoordinatorServer::~CoordinatorServer() {
  coordinator_->StopHolding();
  server_.reset();
}

}  // namespace psflow
