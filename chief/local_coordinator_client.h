// The in-process twin of GrpcCoordinatorClient: a CoordinatorClient that
// calls a JobCoordinator directly. Part of the chief's public API, so
// workers' and the evaluator's logic can be tested (and whole jobs run)
// inside one process, as LocalPsShard does for the parameter servers.
// Long polls (a finished worker's report, AwaitStatusChange) block the
// calling thread, waiting on the coordinator's clock.
//
// Thread-safe. The JobCoordinator must outlive the client.
#ifndef PSFLOW_CHIEF_LOCAL_COORDINATOR_CLIENT_H_
#define PSFLOW_CHIEF_LOCAL_COORDINATOR_CLIENT_H_

#include <optional>
#include <string>

#include "chief/job_coordinator.h"
#include "client/coordinator_client.h"

namespace psflow {

class LocalCoordinatorClient final : public CoordinatorClient {
 public:
  // `self` as for GrpcCoordinatorClient: who asks for the status.
  explicit LocalCoordinatorClient(JobCoordinator* coordinator,
                                  std::optional<TaskId> self = std::nullopt)
      : coordinator_(coordinator), self_(self) {}

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
  JobCoordinator* const coordinator_;
  const std::optional<TaskId> self_;
};

}  // namespace psflow

#endif  // PSFLOW_CHIEF_LOCAL_COORDINATOR_CLIENT_H_
