#include "chief/local_coordinator_client.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/mutex.h"

namespace psflow {

absl::StatusOr<JobSpec> LocalCoordinatorClient::Register(const TaskId& task,
                                                         uint64_t incarnation,
                                                         absl::Time deadline) {
  const RegisterTaskRequest request = RegisterRequest(task, incarnation);
  while (true) {
    absl::StatusOr<JobSpec> spec = coordinator_->Register(request);
    // FailedPrecondition: still initializing, as the gRPC client retries.
    Clock& clock = coordinator_->clock();
    if (!absl::IsFailedPrecondition(spec.status()) || clock.Now() >= deadline) {
      return spec;
    }
    clock.SleepFor(absl::Milliseconds(5));
  }
}

absl::StatusOr<StatusResponse> LocalCoordinatorClient::ReportProgress(
    const ProgressReport& report, absl::Duration timeout) {
  // A long poll waits on the coordinator's clock, within the call's
  // timeout as over gRPC.
  const int64_t timeout_ms = absl::ToInt64Milliseconds(timeout);
  if (report.wait_for_news_ms() > timeout_ms) {
    ProgressReport bounded = report;
    bounded.set_wait_for_news_ms(timeout_ms);
    return coordinator_->Progress(bounded);
  }
  return coordinator_->Progress(report);
}

absl::StatusOr<StatusResponse> LocalCoordinatorClient::GetStatus(
    absl::Duration) {
  const StatusRequest request = StatusRequestFrom(self_);
  return coordinator_->Status(request);
}

absl::StatusOr<StatusResponse> LocalCoordinatorClient::AwaitStatusChange(
    const StatusResponse& known, absl::Duration wait, absl::Duration) {
  return coordinator_->Status(StatusChangeRequest(self_, known, wait));
}

absl::StatusOr<JobDescription> LocalCoordinatorClient::DescribeJob(
    absl::Duration) {
  return coordinator_->Describe();
}

absl::Status LocalCoordinatorClient::ReportEvaluation(
    const EvaluationReport& report, absl::Duration) {
  return coordinator_->Evaluation(report);
}

absl::StatusOr<int64_t> LocalCoordinatorClient::RestoreCheckpoint(
    const std::string& path, absl::Duration timeout) {
  // Answered by the chief's main loop, like the RPC.
  struct Result {
    Notification done;
    absl::StatusOr<int64_t> step;
  };
  auto result = std::make_shared<Result>();
  coordinator_->RequestRestore(JobCoordinator::RestoreRequest{
      path, [result](absl::StatusOr<int64_t> step) {
        result->step = std::move(step);
        result->done.Notify();
      }});
  if (!result->done.WaitForNotificationWithTimeout(timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("the chief did not restore ", path, " within ",
                     absl::FormatDuration(timeout)));
  }
  return result->step;
}

}  // namespace psflow
