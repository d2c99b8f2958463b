#include "chief/server_board.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

StatsResponse Stats(int64_t received, int64_t sent, int64_t shared) {
  StatsResponse s;
  s.set_num_variables(3);
  s.set_total_elements(1000);
  s.set_bytes_received(received);
  s.set_bytes_sent(sent);
  s.set_shared_memory_bytes(shared);
  s.set_resident_bytes(5 << 20);
  s.set_stale_gradients_dropped(7);
  return s;
}

TEST(ServerBoardTest, ServersStartMissingAndTurnServingWhenProbed) {
  ServerBoard board({{0, "h0:1"}, {1, "h1:1"}});
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  board.RecordProbe(0, absl::OkStatus(), t0);
  board.RecordProbe(1, absl::UnavailableError("connection refused"), t0);
  std::vector<TaskView> views = board.Views(t0 + absl::Seconds(2));
  ASSERT_EQ(views.size(), 2);
  EXPECT_EQ(views[0].task(), "ps-0");
  EXPECT_EQ(views[0].address(), "h0:1");
  EXPECT_EQ(views[0].state(), TaskView::SERVING);
  EXPECT_DOUBLE_EQ(views[0].seconds_since_contact(), 2);
  EXPECT_EQ(views[1].state(), TaskView::MISSING);
  EXPECT_DOUBLE_EQ(views[1].seconds_since_contact(), -1);
  EXPECT_THAT(views[1].detail(), HasSubstr("connection refused"));
}

TEST(ServerBoardTest, RatesComeFromTheLatestTwoSamples) {
  ServerBoard board({{0, "h0:1"}});
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  board.RecordStats({Stats(100, 200, 300)}, t0);
  std::vector<TaskView> views = board.Views(t0);
  EXPECT_EQ(views[0].bytes_per_sec(), 0);  // one sample: no rate yet
  board.RecordStats({Stats(1100, 2200, 3300)}, t0 + absl::Seconds(2));
  views = board.Views(t0 + absl::Seconds(2));
  EXPECT_DOUBLE_EQ(views[0].bytes_per_sec(), (1000 + 2000 + 3000) / 2.0);
  EXPECT_EQ(views[0].resident_bytes(), 5 << 20);
  EXPECT_EQ(views[0].variable_bytes(), 4000);
  EXPECT_EQ(views[0].stale_gradients_dropped(), 7);
  EXPECT_EQ(views[0].detail(), "3 variables");
  // A restarted server counts from zero: no negative rate.
  board.RecordStats({Stats(10, 20, 0)}, t0 + absl::Seconds(3));
  EXPECT_EQ(board.Views(t0 + absl::Seconds(3))[0].bytes_per_sec(), 0);
}

TEST(ServerBoardTest, AServerThatStopsAnsweringIsUnreachable) {
  ServerBoard board({{0, "h0:1"}});
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  board.RecordStats({Stats(0, 0, 0)}, t0);
  board.RecordStats({absl::UnavailableError("ps-0 at h0:1: Socket closed")},
                    t0 + absl::Seconds(1));
  const TaskView view = board.Views(t0 + absl::Seconds(5))[0];
  EXPECT_EQ(view.state(), TaskView::UNREACHABLE);
  EXPECT_DOUBLE_EQ(view.seconds_since_contact(), 5);
  EXPECT_THAT(view.detail(), HasSubstr("Socket closed"));
}

TEST(ServerBoardTest, ShutdownFinishesEveryServer) {
  ServerBoard board({{0, "h0:1"}, {1, "h1:1"}});
  board.RecordShutdown(absl::OkStatus(), absl::FromUnixSeconds(1000));
  for (const TaskView& view : board.Views(absl::FromUnixSeconds(1001))) {
    EXPECT_EQ(view.state(), TaskView::FINISHED);
    EXPECT_THAT(view.detail(), HasSubstr("told to stop"));
  }
}

// TF_CONFIG's sparse form: servers 0 and 2. The second answer is ps-2's.
TEST(ServerBoardTest, ASparsePsJobMapsAnswersToTheRightServers) {
  ServerBoard board({{0, "h0:1"}, {2, "h2:1"}});
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  board.RecordStats({Stats(0, 0, 0), absl::UnavailableError("gone")}, t0);
  const std::vector<TaskView> views = board.Views(t0);
  ASSERT_EQ(views.size(), 2);
  EXPECT_EQ(views[0].task(), "ps-0");
  EXPECT_EQ(views[0].state(), TaskView::SERVING);
  EXPECT_EQ(views[1].task(), "ps-2");
  EXPECT_EQ(views[1].state(), TaskView::MISSING);
  EXPECT_THAT(views[1].detail(), HasSubstr("gone"));
}

}  // namespace
}  // namespace psflow
