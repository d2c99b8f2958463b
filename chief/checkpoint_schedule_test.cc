#include "chief/checkpoint_schedule.h"

#include "gtest/gtest.h"

namespace psflow {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(CheckpointScheduleTest, EveryNSteps) {
  CheckpointConfig config;
  config.set_save_every_steps(100);
  CheckpointSchedule schedule(config, -1, kT0);
  EXPECT_FALSE(schedule.Due(99, kT0 + absl::Hours(5)));
  EXPECT_TRUE(schedule.Due(100, kT0));
  schedule.Saved(130, kT0);
  EXPECT_FALSE(schedule.Due(229, kT0));
  EXPECT_TRUE(schedule.Due(230, kT0));
}

TEST(CheckpointScheduleTest, EveryNSecondsButNeverTheSameStepTwice) {
  CheckpointConfig config;
  config.set_save_every_secs(10);
  CheckpointSchedule schedule(config, 500, kT0);  // restored at step 500
  EXPECT_FALSE(schedule.Due(501, kT0 + absl::Seconds(9)));
  EXPECT_TRUE(schedule.Due(501, kT0 + absl::Seconds(10)));
  EXPECT_FALSE(schedule.Due(500, kT0 + absl::Seconds(60)));
  schedule.Saved(501, kT0 + absl::Seconds(10));
  EXPECT_FALSE(schedule.Due(600, kT0 + absl::Seconds(19)));
  EXPECT_TRUE(schedule.Due(600, kT0 + absl::Seconds(20)));
}

TEST(CheckpointScheduleTest, StepsOrSecondsWhicheverComesFirst) {
  CheckpointConfig config;
  config.set_save_every_steps(1000);
  config.set_save_every_secs(30);
  CheckpointSchedule schedule(config, -1, kT0);
  EXPECT_TRUE(schedule.Due(1000, kT0 + absl::Seconds(1)));
  EXPECT_TRUE(schedule.Due(5, kT0 + absl::Seconds(30)));
  EXPECT_FALSE(schedule.Due(5, kT0 + absl::Seconds(29)));
}

}  // namespace
}  // namespace psflow
