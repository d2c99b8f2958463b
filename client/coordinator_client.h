// How workers, the evaluator and operators' tools talk to the chief, as an
// interface: GrpcCoordinatorClient (client/grpc_coordinator_client.h)
// reaches a chief over the network; LocalCoordinatorClient
// (chief/local_coordinator_client.h) calls an in-process JobCoordinator,
// so a role's logic can be tested without processes.
//
// Every call is bounded (`deadline` or `timeout`). Implementations are
// thread-safe.
#ifndef PSFLOW_CLIENT_COORDINATOR_CLIENT_H_
#define PSFLOW_CLIENT_COORDINATOR_CLIENT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/task.h"
#include "proto/coordinator.pb.h"

namespace psflow {

class CoordinatorClient {
 public:
  virtual ~CoordinatorClient() = default;

  // Joins the job and returns its spec, retrying while the chief is not
  // up yet or still initializing, until `deadline` (DeadlineExceeded,
  // naming the chief, then).
  virtual absl::StatusOr<JobSpec> Register(const TaskId& task,
                                           uint64_t incarnation,
                                           absl::Time deadline) = 0;

  // A worker's heartbeat; the answer is the job's status.
  virtual absl::StatusOr<StatusResponse> ReportProgress(
      const ProgressReport& report, absl::Duration timeout) = 0;
  virtual absl::StatusOr<StatusResponse> GetStatus(absl::Duration timeout) = 0;
  // A long poll (the evaluator's): the status once the job's state or
  // generation differs from `known`'s, or once `wait` is over (the chief
  // holds a call a few seconds at most); the call is bounded by `wait`
  // plus `timeout`. By default, and from a chief that holds no calls,
  // answered at once as GetStatus.
  virtual absl::StatusOr<StatusResponse> AwaitStatusChange(
      const StatusResponse& known, absl::Duration wait,
      absl::Duration timeout) {
    return GetStatus(timeout);
  }
  virtual absl::Status ReportEvaluation(const EvaluationReport& report,
                                        absl::Duration timeout) = 0;
  // Asks the chief to restore a checkpoint into the running job; returns
  // the step training resumes from.
  virtual absl::StatusOr<int64_t> RestoreCheckpoint(const std::string& path,
                                                    absl::Duration timeout) = 0;
  // The chief's view of every task (`psctl status`).
  virtual absl::StatusOr<JobDescription> DescribeJob(
      absl::Duration timeout) = 0;
};

// The requests every implementation sends: a task joining the job (with
// this release's protocol version), and a status request naming who asks
// (none: an operator's tool).
RegisterTaskRequest RegisterRequest(const TaskId& task, uint64_t incarnation);
StatusRequest StatusRequestFrom(const std::optional<TaskId>& self);
// The same asking to wait up to `wait` for a change from `known`.
StatusRequest StatusChangeRequest(const std::optional<TaskId>& self,
                                  const StatusResponse& known,
                                  absl::Duration wait);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_COORDINATOR_CLIENT_H_
