#include "client/grpc_coordinator_client.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/rpc/channel.h"
#include "common/rpc/grpc_status.h"

namespace psflow {
namespace {

std::unique_ptr<grpc::ClientContext> Context(absl::Time deadline) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(deadline));
  return context;
}

}  // namespace

GrpcCoordinatorClient::GrpcCoordinatorClient(const std::string& address,
                                             std::string chief,
                                             const TransportSecurity& security,
                                             std::optional<TaskId> self,
                                             const std::string& expected_server)
    : chief_(std::move(chief)),
      self_(std::move(self)),
      stub_(Coordinator::NewStub(OpenChannel(
          address, security, grpc::ChannelArguments(), expected_server))) {}

absl::StatusOr<JobSpec> GrpcCoordinatorClient::Register(const TaskId& task,
                                                        uint64_t incarnation,
                                                        absl::Time deadline) {
  const RegisterTaskRequest request = RegisterRequest(task, incarnation);
  grpc::Status last;
  while (true) {
    // Wait for the connection (bounded per attempt) rather than fail fast.
    auto context = Context(std::min(deadline, absl::Now() + absl::Seconds(5)));
    context->set_wait_for_ready(true);
    RegisterTaskResponse response;
    last = stub_->RegisterTask(context.get(), request, &response);
    if (last.ok()) return response.spec();
    const bool retry =
        last.error_code() == grpc::StatusCode::UNAVAILABLE ||
        last.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
        last.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (!retry || absl::Now() + absl::Milliseconds(200) >= deadline) break;
    RealClock().SleepFor(absl::Milliseconds(200));
  }
  absl::Status status =
      FromGrpcStatus(last, absl::StrCat("joining the job at ", chief_));
  if (status.code() == absl::StatusCode::kFailedPrecondition ||
      status.code() == absl::StatusCode::kUnavailable ||
      status.code() == absl::StatusCode::kDeadlineExceeded) {
    // A connection TLS refuses looks like a chief that never answers.
    return absl::DeadlineExceededError(absl::StrCat(
        status.message(),
        " (gave up at the startup deadline; is the chief running and its "
        "address in TF_CONFIG right? Do both sides use the same transport "
        "security: a task without --tls_dir cannot reach a chief with TLS, "
        "nor the reverse)"));
  }
  return status;
}

absl::StatusOr<StatusResponse> GrpcCoordinatorClient::ReportProgress(
    const ProgressReport& report, absl::Duration timeout) {
  StatusResponse response;
  auto context = Context(absl::Now() + timeout);
  grpc::Status status = stub_->ReportProgress(context.get(), report, &response);
  if (!status.ok()) return FromGrpcStatus(status, "report to " + chief_);
  return response;
}

absl::StatusOr<StatusResponse> GrpcCoordinatorClient::GetStatus(
    absl::Duration timeout) {
  return Status(StatusRequestFrom(self_), timeout);
}

absl::StatusOr<StatusResponse> GrpcCoordinatorClient::AwaitStatusChange(
    const StatusResponse& known, absl::Duration wait, absl::Duration timeout) {
  wait = std::max(wait, absl::ZeroDuration());
  return Status(StatusChangeRequest(self_, known, wait), wait + timeout);
}

absl::StatusOr<StatusResponse> GrpcCoordinatorClient::Status(
    const StatusRequest& request, absl::Duration timeout) {
  StatusResponse response;
  auto context = Context(absl::Now() + timeout);
  grpc::Status status = stub_->GetStatus(context.get(), request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "status from " + chief_);
  return response;
}

absl::StatusOr<JobDescription> GrpcCoordinatorClient::DescribeJob(
    absl::Duration timeout) {
  JobDescription response;
  auto context = Context(absl::Now() + timeout);
  grpc::Status status =
      stub_->DescribeJob(context.get(), DescribeJobRequest(), &response);
  if (!status.ok())
    return FromGrpcStatus(status, "job description from " + chief_);
  return response;
}

absl::Status GrpcCoordinatorClient::ReportEvaluation(
    const EvaluationReport& report, absl::Duration timeout) {
  EvaluationAck ack;
  auto context = Context(absl::Now() + timeout);
  return FromGrpcStatus(stub_->ReportEvaluation(context.get(), report, &ack),
                        "evaluation report to " + chief_);
}

absl::StatusOr<int64_t> GrpcCoordinatorClient::RestoreCheckpoint(
    const std::string& path, absl::Duration timeout) {
  RestoreCheckpointRequest request;
  request.set_path(path);
  RestoreCheckpointResponse response;
  auto context = Context(absl::Now() + timeout);
  grpc::Status status =
      stub_->RestoreCheckpoint(context.get(), request, &response);
  if (!status.ok()) {
    return FromGrpcStatus(status, "restore through " + chief_);
  }
  return response.global_step();
}

}  // namespace psflow
