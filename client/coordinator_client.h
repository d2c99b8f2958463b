// How workers and the evaluator talk to the chief's Coordinator service.
// Every call has a deadline; errors name the chief and its address.
// Thread-safe.
#ifndef PSFLOW_CLIENT_COORDINATOR_CLIENT_H_
#define PSFLOW_CLIENT_COORDINATOR_CLIENT_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/rpc/transport_security.h"
#include "common/task.h"
#include "proto/coordinator.grpc.pb.h"

namespace psflow {

class CoordinatorClient {
 public:
  // `chief` names it in errors, e.g. "chief-0 at 10.0.0.2:2222".
  // `self` is the calling task (none for operators' tools): the chief
  // learns from its status requests that it heard the job's end.
  CoordinatorClient(const std::string& address, std::string chief,
                    const TransportSecurity& security,
                    std::optional<TaskId> self = std::nullopt);

  // Joins the job and returns its spec, retrying while the chief is not
  // up yet or still initializing, until `deadline` (DeadlineExceeded,
  // naming the chief, then).
  absl::StatusOr<JobSpec> Register(const TaskId& task, uint64_t incarnation,
                                   absl::Time deadline);

  absl::StatusOr<StatusResponse> ReportProgress(const ProgressReport& report,
                                                absl::Duration timeout);
  absl::StatusOr<StatusResponse> GetStatus(absl::Duration timeout);
  absl::Status ReportEvaluation(const EvaluationReport& report,
                                absl::Duration timeout);
  // Asks the chief to restore a checkpoint into the running job; returns
  // the step training resumes from.
  absl::StatusOr<int64_t> RestoreCheckpoint(const std::string& path,
                                            absl::Duration timeout);

 private:
  const std::string chief_;
  const std::optional<TaskId> self_;
  std::unique_ptr<Coordinator::Stub> stub_;
};

}  // namespace psflow

#endif  // PSFLOW_CLIENT_COORDINATOR_CLIENT_H_
