// The Coordinator over gRPC holds long polls (a finished worker's report,
// the evaluator's status request) until the job has news for them, and
// answers every held call when it stops. The coordinator's clock never
// moves here: only news or the server's stop can answer a held call.
#include "chief/coordinator_service.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "chief/job_coordinator.h"
#include "client/grpc_coordinator_client.h"
#include "common/clock.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

class CoordinatorServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    JobCoordinator::Options options;
    options.num_workers = 2;
    options.clock = &clock_;
    coordinator_ = std::make_unique<JobCoordinator>(options);
    JobSpec spec;
    spec.set_total_steps(100);
    spec.mutable_config()->mutable_training()->set_mode(ASYNC);
    coordinator_->SetSpec(spec);
    ASSERT_OK_AND_ASSIGN(
        server_, CoordinatorServer::Start("127.0.0.1:0", TransportSecurity(),
                                          coordinator_.get()));
  }

  std::unique_ptr<GrpcCoordinatorClient> Client(TaskId self) const {
    return std::make_unique<GrpcCoordinatorClient>(
        absl::StrCat("127.0.0.1:", server_->port()), "chief-0",
        TransportSecurity(), self);
  }

  ProgressReport Finished(int index) const {
    ProgressReport report;
    report.set_worker_index(index);
    report.set_finished(true);
    report.set_generation(coordinator_->Status().generation());
    report.set_wait_for_news_ms(5000);
    return report;
  }

  // Progress, not time: the server has handed `count` calls to the
  // coordinator to hold (or fewer were held and `done` came).
  void AwaitHeld(int count, const std::atomic<int>& done) const {
    while (coordinator_->HeldCalls() < count && done.load() == 0) {
      absl::SleepFor(absl::Milliseconds(1));
    }
  }

  FakeClock clock_;
  std::unique_ptr<JobCoordinator> coordinator_;
  std::unique_ptr<CoordinatorServer> server_;
};

TEST_F(CoordinatorServiceTest, AFinishedWorkerHearsTheEndTheMomentItComes) {
  auto worker = Client(TaskId{TaskType::kWorker, 0});
  absl::StatusOr<StatusResponse> answer;
  std::atomic<int> answered{0};
  std::thread call([&] {
    answer = worker->ReportProgress(Finished(0), absl::Seconds(60));
    ++answered;
  });
  AwaitHeld(1, answered);
  EXPECT_EQ(answered.load(), 0) << "answered before the job ended";
  coordinator_->Succeed();
  call.join();
  ASSERT_OK(answer.status());
  EXPECT_EQ(answer->state(), SUCCEEDED);
}

TEST_F(CoordinatorServiceTest, StoppingTheServerAnswersEveryHeldCall) {
  auto worker = Client(TaskId{TaskType::kWorker, 1});
  auto evaluator = Client(TaskId{TaskType::kEvaluator, 0});
  absl::StatusOr<StatusResponse> report_answer, status_answer;
  std::atomic<int> answered{0};
  std::thread report([&] {
    report_answer = worker->ReportProgress(Finished(1), absl::Seconds(60));
    ++answered;
  });
  std::thread status([&] {
    status_answer = evaluator->AwaitStatusChange(
        coordinator_->Status(), absl::Seconds(5), absl::Seconds(60));
    ++answered;
  });
  AwaitHeld(2, answered);
  EXPECT_EQ(answered.load(), 0);
  // Held calls would hold the drain for good (the clock never ends their
  // wait): the server answers them first.
  server_->Stop(absl::Seconds(60));
  report.join();
  status.join();
  ASSERT_OK(report_answer.status());
  EXPECT_EQ(report_answer->state(), TRAINING);
  ASSERT_OK(status_answer.status());
  EXPECT_EQ(status_answer->state(), TRAINING);
  EXPECT_EQ(coordinator_->HeldCalls(), 0);
}

// psctl ckpt restore while the job ends: the chief's main loop no longer
// serves restores, so one that came once the outcome was decided is
// refused at once, and one still waiting when the server stops is
// answered by the stop; either way the server's drain (which waits for
// every open call) ends, and so does the chief.
TEST_F(CoordinatorServiceTest, RestoresAfterTheEndOrAtTheStopAreAnswered) {
  auto psctl = Client(TaskId{TaskType::kChief, 0});
  // Nothing serves this one (no chief's main loop runs here).
  absl::StatusOr<int64_t> waiting;
  std::atomic<int> answered{0};
  std::thread call([&] {
    waiting = psctl->RestoreCheckpoint("/ckpt/ckpt-1", absl::Seconds(60));
    ++answered;
  });
  while (coordinator_->PendingRestores() < 1) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(answered.load(), 0) << "answered while the job runs";
  // The job ends (Chief::Finish): the waiting one is answered...
  coordinator_->Fail("worker-0 failed: NaN loss");
  call.join();
  EXPECT_THAT(waiting, StatusIs(absl::StatusCode::kFailedPrecondition,
                                HasSubstr("the job has ended (FAILED")));
  // ...and a later one at once.
  EXPECT_THAT(psctl->RestoreCheckpoint("/ckpt/ckpt-2", absl::Seconds(60)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("start the job again")));
  EXPECT_EQ(coordinator_->PendingRestores(), 0);
  server_->Stop(absl::Seconds(60));  // returns: no call left open
}

TEST_F(CoordinatorServiceTest, StoppingTheServerAnswersAWaitingRestore) {
  auto psctl = Client(TaskId{TaskType::kChief, 0});
  absl::StatusOr<int64_t> waiting;
  std::thread call([&] {
    waiting = psctl->RestoreCheckpoint("/ckpt/ckpt-1", absl::Seconds(60));
  });
  while (coordinator_->PendingRestores() < 1) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  // Without its answer, the drain would wait for the call for good.
  server_->Stop(absl::Seconds(60));
  call.join();
  EXPECT_THAT(waiting, StatusIs(absl::StatusCode::kFailedPrecondition,
                                HasSubstr("the chief is stopping")));
}

}  // namespace
}  // namespace psflow
