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
  // A save that came late (at 130) does not move the next one: at 200.
  schedule.Saved(130, kT0);
  EXPECT_FALSE(schedule.Due(199, kT0));
  EXPECT_TRUE(schedule.Due(200, kT0));
  schedule.Saved(200, kT0);
  EXPECT_FALSE(schedule.Due(299, kT0));
  EXPECT_TRUE(schedule.Due(300, kT0));
  // Restored at 250: the next multiple, 300.
  CheckpointSchedule restored(config, 250, kT0);
  EXPECT_FALSE(restored.Due(299, kT0));
  EXPECT_TRUE(restored.Due(300, kT0));
}

TEST(CheckpointScheduleTest, NamesTheNextStepBasedSave) {
  CheckpointConfig config;
  config.set_save_every_steps(100);
  CheckpointSchedule schedule(config, -1, kT0);
  EXPECT_EQ(schedule.NextStep(), 100);
  schedule.Saved(130, kT0);
  EXPECT_EQ(schedule.NextStep(), 200);
  EXPECT_EQ(CheckpointSchedule(config, 250, kT0).NextStep(), 300);
  config.set_save_every_steps(0);
  config.set_save_every_secs(60);
  EXPECT_EQ(CheckpointSchedule(config, -1, kT0).NextStep(), 0);
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
