// Test helper: a CoordinatorClient that passes every call to another one,
// so a test's fake overrides only the call it changes (counting reports,
// answering as a restarting chief, falling silent).
#ifndef PSFLOW_TESTS_FORWARDING_COORDINATOR_H_
#define PSFLOW_TESTS_FORWARDING_COORDINATOR_H_

#include <string>

#include "client/coordinator_client.h"

namespace psflow::testing {

class ForwardingCoordinator : public CoordinatorClient {
 public:
  explicit ForwardingCoordinator(CoordinatorClient* inner) : inner_(inner) {}

  absl::StatusOr<JobSpec> Register(const TaskId& task, uint64_t incarnation,
                                   absl::Time deadline) override {
    return inner_->Register(task, incarnation, deadline);
  }
  absl::StatusOr<StatusResponse> ReportProgress(
      const ProgressReport& report, absl::Duration timeout) override {
    return inner_->ReportProgress(report, timeout);
  }
  absl::StatusOr<StatusResponse> GetStatus(absl::Duration timeout) override {
    return inner_->GetStatus(timeout);
  }
  // AwaitStatusChange is not forwarded: it answers through GetStatus at
  // once (as a chief that holds no calls), so a fake that overrides
  // GetStatus sees every status request.
  absl::Status ReportEvaluation(const EvaluationReport& report,
                                absl::Duration timeout) override {
    return inner_->ReportEvaluation(report, timeout);
  }
  absl::StatusOr<int64_t> RestoreCheckpoint(const std::string& path,
                                            absl::Duration timeout) override {
    return inner_->RestoreCheckpoint(path, timeout);
  }
  absl::StatusOr<JobDescription> DescribeJob(absl::Duration timeout) override {
    return inner_->DescribeJob(timeout);
  }

 private:
  CoordinatorClient* const inner_;
};

}  // namespace psflow::testing

#endif  // PSFLOW_TESTS_FORWARDING_COORDINATOR_H_
