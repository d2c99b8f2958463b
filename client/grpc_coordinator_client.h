// The CoordinatorClient that reaches the chief's Coordinator service over
// gRPC: what workers, the evaluator and psctl use. Every call has a
// deadline; errors name the chief and its address. Thread-safe.
#ifndef PSFLOW_CLIENT_GRPC_COORDINATOR_CLIENT_H_
#define PSFLOW_CLIENT_GRPC_COORDINATOR_CLIENT_H_

#include <memory>
#include <optional>
#include <string>

#include "client/coordinator_client.h"
#include "common/rpc/transport_security.h"
#include "common/task.h"
#include "proto/coordinator.grpc.pb.h"

namespace psflow {

class GrpcCoordinatorClient final : public CoordinatorClient {
 public:
  // `chief` names it in errors, e.g. "chief-0 at 10.0.0.2:2222".
  // `self` is the calling task (none for operators' tools): the chief
  // learns from its status requests that it heard the job's end. With
  // mutual TLS the server must present the certificate of
  // `expected_server` (the coordinating task: "chief-0", or "worker-0" in
  // a job without a chief); empty: any of the job's (psctl given only an
  // address).
  GrpcCoordinatorClient(const std::string& address, std::string chief,
                        const TransportSecurity& security,
                        std::optional<TaskId> self = std::nullopt,
                        const std::string& expected_server = "");

  absl::StatusOr<JobSpec> Register(const TaskId& task, uint64_t incarnation,
                                   absl::Time deadline) override;
  absl::StatusOr<StatusResponse> ReportProgress(
      const ProgressReport& report, absl::Duration timeout) override;
  absl::StatusOr<StatusResponse> GetStatus(absl::Duration timeout) override;
  absl::StatusOr<StatusResponse> AwaitStatusChange(
      const StatusResponse& known, absl::Duration wait,
      absl::Duration timeout) override;
  absl::Status ReportEvaluation(const EvaluationReport& report,
                                absl::Duration timeout) override;
  absl::StatusOr<int64_t> RestoreCheckpoint(const std::string& path,
                                            absl::Duration timeout) override;
  absl::StatusOr<JobDescription> DescribeJob(absl::Duration timeout) override;

 private:
  absl::StatusOr<StatusResponse> Status(const StatusRequest& request,
                                        absl::Duration timeout);

  const std::string chief_;
  const std::optional<TaskId> self_;
  std::unique_ptr<Coordinator::Stub> stub_;
};

}  // namespace psflow

#endif  // PSFLOW_CLIENT_GRPC_COORDINATOR_CLIENT_H_
