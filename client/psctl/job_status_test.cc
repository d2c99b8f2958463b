#include "client/psctl/job_status.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

TaskView View(const std::string& task, TaskView::State state,
              double seen = 0.5) {
  TaskView v;
  v.set_task(task);
  v.set_address(task + ".job:2222");
  v.set_state(state);
  v.set_seconds_since_contact(seen);
  return v;
}

JobLook Look(JobState state, std::vector<TaskView> tasks) {
  JobLook look;
  JobDescription d;
  d.set_job_name("demo");
  d.set_mode(ASYNC);
  d.mutable_status()->set_state(state);
  d.mutable_status()->set_global_step(300);
  d.mutable_status()->set_total_steps(1200);
  d.set_activity("supervising training");
  for (TaskView& t : tasks) *d.add_tasks() = std::move(t);
  look.description = d;
  return look;
}

TEST(JobStatusTest, ATrainingJobRendersEveryColumn) {
  TaskView ps = View("ps-0", TaskView::SERVING);
  ps.set_bytes_per_sec(3 << 20);
  ps.set_resident_bytes(100 << 20);
  ps.set_variable_bytes(800);
  ps.set_stale_gradients_dropped(4);
  TaskView worker = View("worker-0", TaskView::TRAINING);
  worker.set_local_steps(150);
  worker.set_examples_per_sec(9600);
  worker.set_loss(0.5);
  const JobLook look =
      Look(TRAINING, {View("chief-0", TaskView::COORDINATING, 0), ps, worker});
  const Health health = JudgeHealth(look);
  EXPECT_TRUE(health.healthy);
  const std::string text = RenderJobLook(look, health);
  EXPECT_THAT(text, HasSubstr("job demo (ASYNC): TRAINING, global step 300 "
                              "of 1200 (25%)"));
  EXPECT_THAT(text, HasSubstr("chief: supervising training"));
  EXPECT_THAT(text, HasSubstr("3.0MiB/s"));
  EXPECT_THAT(text, HasSubstr("100.0MiB"));
  EXPECT_THAT(text, HasSubstr("9600"));
  EXPECT_THAT(text, HasSubstr("loss 0.5000"));
  EXPECT_THAT(text, HasSubstr("\nhealthy\n"));
  EXPECT_THAT(text, Not(HasSubstr("missing:")));
}

TEST(JobStatusTest, StartupNamesMissingTasksAndIsNotUnhealthy) {
  JobLook look = Look(INITIALIZING, {View("chief-0", TaskView::COORDINATING, 0),
                                     View("ps-0", TaskView::SERVING),
                                     View("ps-1", TaskView::MISSING, -1),
                                     View("worker-0", TaskView::MISSING, -1)});
  look.probes["ps-1"] = {"ps-1.job:2222",
                         absl::UnavailableError("connection refused")};
  look.probes["worker-0"] = {"worker-0.job:2222", absl::OkStatus()};
  look.description->set_starting(true);
  const Health health = JudgeHealth(look);
  EXPECT_TRUE(health.healthy);
  const std::string text = RenderJobLook(look, health);
  EXPECT_THAT(text, HasSubstr("missing: ps-1, worker-0"));
  EXPECT_THAT(text, HasSubstr("its port does not answer (connection refused)"));
  EXPECT_THAT(text, HasSubstr("its port answers (the process is up)"));
  EXPECT_THAT(text, HasSubstr("never"));
}

TEST(JobStatusTest, LostFailedAndUnreachableTasksAreUnhealthy) {
  TaskView lost = View("worker-1", TaskView::LOST, 70);
  lost.set_detail("no heartbeat for 1m10s");
  const JobLook look =
      Look(TRAINING, {View("ps-0", TaskView::UNREACHABLE, 9), lost,
                      View("worker-2", TaskView::MISSING, -1)});
  const Health health = JudgeHealth(look);
  EXPECT_FALSE(health.healthy);
  EXPECT_THAT(health.problems,
              ElementsAre(HasSubstr("ps-0 is UNREACHABLE"),
                          "worker-1 is LOST: no heartbeat for 1m10s",
                          "worker-2 never joined"));
  EXPECT_THAT(RenderJobLook(look, health), HasSubstr("UNHEALTHY\n"));
}

TEST(JobStatusTest, AFinishedJobIsHealthyAndOver) {
  const JobLook look = Look(SUCCEEDED, {View("worker-0", TaskView::FINISHED)});
  EXPECT_TRUE(JudgeHealth(look).healthy);
  EXPECT_TRUE(JobOver(look));
  EXPECT_FALSE(JobOver(Look(TRAINING, {})));
  const JobLook failed = Look(FAILED, {});
  EXPECT_THAT(JudgeHealth(failed).problems,
              ElementsAre(HasSubstr("the job failed")));
}

// --watch looks again at a chief that missed a look or two (busy, stopped
// a moment, not up yet) and stops once it stayed silent, or the job ended.
TEST(JobStatusTest, AWatchOutlastsAFewUnansweredLooks) {
  JobLook silent;
  silent.chief = absl::DeadlineExceededError("Deadline Exceeded");
  for (int n = 1; n < kWatchUnansweredLooks; ++n) {
    EXPECT_FALSE(WatchEnds(silent, n)) << n;
  }
  EXPECT_TRUE(WatchEnds(silent, kWatchUnansweredLooks));
  EXPECT_FALSE(WatchEnds(Look(TRAINING, {}), 0));
  EXPECT_TRUE(WatchEnds(Look(SUCCEEDED, {}), 0));
}

// A refusal says what to fix: another task's address (it refuses psctl
// DescribeJob), or a TLS failure though credentials were passed (a metrics
// port, another job's files) rather than "pass the credentials".
TEST(JobStatusTest, ARefusalNamesTheLikelyMistake) {
  JobLook server;
  server.chief = absl::PermissionDeniedError(
      "DescribeJob is for the chief, a worker or an evaluator only; the "
      "caller's role is admin");
  EXPECT_THAT(JudgeHealth(server).problems,
              ElementsAre(HasSubstr("this address is not the chief's")));
  JobLook tls;
  tls.chief = absl::UnavailableError("Ssl handshake failed: wrong version");
  EXPECT_THAT(JudgeHealth(tls).problems,
              ElementsAre(HasSubstr("pass its credentials")));
  tls.with_tls = true;
  EXPECT_THAT(JudgeHealth(tls).problems,
              ElementsAre(AllOf(HasSubstr("though psctl passed credentials"),
                                HasSubstr("not its --metrics_port"))));
}

TEST(JobStatusTest, WithoutAChiefItNamesTheTasksStillRunning) {
  JobLook look;
  look.chief = absl::UnavailableError("connection refused");
  look.probes["chief-0"] = {"c:1", absl::UnavailableError("refused")};
  look.probes["worker-1"] = {"w1:1", absl::OkStatus()};
  look.probes["ps-0"] = {"p0:1", absl::UnavailableError("refused")};
  const Health health = JudgeHealth(look);
  EXPECT_FALSE(health.healthy);
  EXPECT_THAT(health.problems,
              ElementsAre(HasSubstr("the chief does not answer"),
                          HasSubstr("(not exited): worker-1")));
  EXPECT_TRUE(JobOver(look));
  const std::string text = RenderJobLook(look, health);
  EXPECT_THAT(text, HasSubstr("answers (still running)"));

  JobLook gone;
  gone.chief = absl::UnavailableError("refused");
  gone.probes["chief-0"] = {"c:1", absl::UnavailableError("refused")};
  EXPECT_THAT(JudgeHealth(gone).problems,
              ElementsAre(HasSubstr("does not answer"),
                          HasSubstr("the job is not running")));
  JobLook watched = gone;
  watched.last_seen = "FINAL_EVALUATION at global step 10 of 10, 1s earlier";
  EXPECT_THAT(JudgeHealth(watched).problems[0],
              HasSubstr("(last seen: FINAL_EVALUATION at global step 10"));
  JobLook alone;
  alone.chief = absl::UnavailableError("refused");
  EXPECT_THAT(JudgeHealth(alone).problems, ElementsAre(HasSubstr("chief")));
  EXPECT_THAT(JudgeHealth(alone).problems, Not(IsEmpty()));
}

}  // namespace
}  // namespace psflow
