#include "chief/termination.h"

#include "common/mutex.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::ExitedWithCode;

TEST(ChiefTerminationTest, ASignalDuringTrainingAsksForTheSave) {
  ChiefTermination termination(absl::Hours(1));
  EXPECT_FALSE(termination.requested().has_value());
  EXPECT_EQ(termination.ExitCode(1), 1);
  termination.SetTraining(true);
  termination.OnSignal("SIGTERM");
  EXPECT_EQ(termination.requested(), "SIGTERM");
  EXPECT_EQ(termination.ExitCode(1), 128 + 15);
}

TEST(ChiefTerminationDeathTest, ASignalOutsideTrainingExitsAtOnce) {
  ChiefTermination termination(absl::Hours(1));
  EXPECT_EXIT(termination.OnSignal("SIGINT"), ExitedWithCode(128 + 2),
              "received SIGINT; exiting");
}

TEST(ChiefTerminationDeathTest, ASecondSignalExitsAtOnce) {
  EXPECT_EXIT(
      {
        ChiefTermination termination(absl::Hours(1));
        termination.SetTraining(true);
        termination.OnSignal("SIGTERM");
        termination.OnSignal("SIGTERM");
      },
      ExitedWithCode(128 + 15), "without waiting for the checkpoint");
}

TEST(ChiefTerminationDeathTest, ASaveOverrunningItsBoundExits) {
  EXPECT_EXIT(
      {
        ChiefTermination termination(absl::Milliseconds(10));
        termination.SetTraining(true);
        termination.OnSignal("SIGTERM");
        Notification never;  // the save that never ends
        never.WaitForNotification();
      },
      ExitedWithCode(128 + 15), "did not finish within");
}

}  // namespace
}  // namespace psflow
