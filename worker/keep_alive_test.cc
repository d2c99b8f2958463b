#include "worker/keep_alive.h"

#include <atomic>
#include <optional>
#include <string>

#include "absl/time/clock.h"
#include "chief/job_coordinator.h"
#include "chief/local_coordinator_client.h"
#include "common/clock.h"
#include "common/status_matchers.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"

namespace psflow {
namespace {

// A real chief's coordinator in process, with a short heartbeat timeout.
class KeepAliveTest : public ::testing::Test {
 protected:
  KeepAliveTest() : coordinator_(Options()), client_(&coordinator_) {
    JobSpec spec;
    spec.set_total_steps(100);
    spec.mutable_config()->mutable_training()->set_mode(ASYNC);
    coordinator_.SetSpec(spec);
    RegisterTaskRequest request;
    request.set_protocol_version(kProtocolVersion);
    request.set_task_type("worker");
    request.set_task_index(0);
    EXPECT_OK(coordinator_.Register(request));
  }

  static JobCoordinator::Options Options() {
    JobCoordinator::Options options;
    options.num_workers = 1;
    options.heartbeat_timeout = absl::Seconds(1);
    // The job's only worker lost: how long the chief waits for a restart.
    options.worker_replacement_timeout = absl::Seconds(1);
    return options;
  }

  // Waits until the chief's latest report from worker 0 satisfies `done`.
  template <typename Predicate>
  bool WaitForReport(Predicate done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      if (done(coordinator_.LastReports().at(0))) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }

  JobCoordinator coordinator_;
  LocalCoordinatorClient client_;
};

TEST_F(KeepAliveTest, TheFirstReportSaysTheWorkerIsPreparing) {
  KeepAlive keep_alive(&client_, PreparingReport(0, 42),
                       absl::Milliseconds(100));
  EXPECT_TRUE(WaitForReport([](const ProgressReport& r) {
    return r.preparing() && r.incarnation() == 42;
  }));
}

TEST_F(KeepAliveTest, WithoutItASilentWorkerIsLost) {
  EXPECT_TRUE(coordinator_.WaitForTrainingEnd(absl::Now() + absl::Seconds(60)));
  EXPECT_EQ(coordinator_.CountWorkers().lost, 1);
  EXPECT_EQ(coordinator_.state(), FAILED);
}

TEST_F(KeepAliveTest, ResendsTheLatestRememberedReport) {
  KeepAlive keep_alive(&client_, PreparingReport(0, 1),
                       absl::Milliseconds(100));
  ASSERT_TRUE(
      WaitForReport([](const ProgressReport& r) { return r.preparing(); }));
  ProgressReport stepping;
  stepping.set_worker_index(0);
  stepping.set_local_steps(7);
  keep_alive.Remember(stepping);  // as if the trainer had just sent it
  EXPECT_EQ(keep_alive.latest().local_steps(), 7);
  EXPECT_TRUE(WaitForReport([](const ProgressReport& r) {
    return !r.preparing() && r.local_steps() == 7;
  }));
}

// The trainer's finished report asks the chief to hold it until the job
// has news; the keep-alive's resends of it are answered at once, so its
// thread (which the worker's exit joins) never waits on the chief.
TEST_F(KeepAliveTest, ResendsAreNeverHeldByTheChief) {
  KeepAlive keep_alive(&client_, PreparingReport(0, 1),
                       absl::Milliseconds(100));
  ProgressReport finished;
  finished.set_worker_index(0);
  finished.set_finished(true);
  finished.set_generation(coordinator_.Status().generation());
  finished.set_wait_for_news_ms(5000);
  keep_alive.Remember(finished);
  EXPECT_TRUE(keep_alive.latest().finished());
  EXPECT_EQ(keep_alive.latest().wait_for_news_ms(), 0);
}

// A worker blocked in a call hears the job's end through its keep-alive:
// the action runs (again for each ending answer) and the outcome is kept
// for when the chief is gone.
TEST_F(KeepAliveTest, TheJobsEndRunsTheActionAndIsRemembered) {
  KeepAlive keep_alive(&client_, PreparingReport(0, 1),
                       absl::Milliseconds(100));
  std::atomic<int> actions{0};
  keep_alive.OnJobEnd([&actions] { ++actions; });
  ASSERT_TRUE(
      WaitForReport([](const ProgressReport& r) { return r.preparing(); }));
  EXPECT_EQ(actions.load(), 0) << "the job has not ended";
  EXPECT_FALSE(keep_alive.JobEnded().has_value());

  coordinator_.Fail("ps-1 did not come back");
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (actions.load() < 2 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_GE(actions.load(), 2);
  std::optional<StatusResponse> ended = keep_alive.JobEnded();
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(ended->state(), FAILED);
  EXPECT_NE(ended->message().find("ps-1 did not come back"), std::string::npos)
      << ended->message();

  // Unhooked: the action never runs again.
  keep_alive.OnJobEnd(nullptr);
  const int seen = actions.load();
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(actions.load(), seen);
}

// The keep-alive on the chief's clock: a worker that prepares for three
// minutes (three heartbeat timeouts) is never declared lost, checked at
// every second of them, in milliseconds of real time.
TEST(KeepAliveClockTest, APreparingWorkerOutlastsTheHeartbeatTimeout) {
  FakeClock clock;
  JobCoordinator::Options options;
  options.num_workers = 1;
  options.heartbeat_timeout = absl::Seconds(60);
  options.clock = &clock;
  JobCoordinator coordinator(options);
  JobSpec spec;
  spec.set_total_steps(100);
  spec.mutable_config()->mutable_training()->set_mode(ASYNC);
  coordinator.SetSpec(spec);
  RegisterTaskRequest request;
  request.set_protocol_version(kProtocolVersion);
  request.set_task_type("worker");
  ASSERT_OK(coordinator.Register(request));
  LocalCoordinatorClient client(&coordinator);
  KeepAlive keep_alive(&client, PreparingReport(0, 1), absl::Seconds(10),
                       &clock);
  for (int second = 0; second < 180; ++second) {
    clock.AwaitSettled(1);  // the keep-alive sent what was due and waits
    clock.Advance(absl::Seconds(1));
    clock.AwaitSettled(1);
    EXPECT_FALSE(coordinator.WaitForTrainingEnd(clock.Now()));
  }
  EXPECT_EQ(coordinator.CountWorkers().lost, 0);
  EXPECT_TRUE(coordinator.LastReports().at(0).preparing());
}

}  // namespace
}  // namespace psflow
