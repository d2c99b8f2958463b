#include "common/task.h"

#include <set>

#include "gtest/gtest.h"

namespace psflow {
namespace {

TEST(TaskTest, JobNamesRoundTrip) {
  for (TaskType type : kAllTaskTypes) {
    EXPECT_EQ(ParseTaskType(TaskTypeName(type)), type);
  }
  EXPECT_EQ(TaskTypeName(TaskType::kPs), "ps");
}

TEST(TaskTest, JobNamesAreCaseSensitiveAsInTensorFlow) {
  EXPECT_EQ(ParseTaskType("Worker"), std::nullopt);
  EXPECT_EQ(ParseTaskType("master"), std::nullopt);
  EXPECT_EQ(ParseTaskType(""), std::nullopt);
}

TEST(TaskTest, ToStringIsTypeDashIndex) {
  EXPECT_EQ((TaskId{TaskType::kEvaluator, 0}).ToString(), "evaluator-0");
  EXPECT_EQ((TaskId{TaskType::kWorker, 12}).ToString(), "worker-12");
}

TEST(TaskTest, OrdersByRoleThenIndex) {
  std::set<TaskId> tasks = {{TaskType::kWorker, 1},
                            {TaskType::kPs, 3},
                            {TaskType::kWorker, 0},
                            {TaskType::kChief, 0}};
  std::vector<TaskId> ordered(tasks.begin(), tasks.end());
  EXPECT_EQ(ordered[0], (TaskId{TaskType::kChief, 0}));
  EXPECT_EQ(ordered[1], (TaskId{TaskType::kPs, 3}));
  EXPECT_EQ(ordered[2], (TaskId{TaskType::kWorker, 0}));
  EXPECT_EQ(ordered[3], (TaskId{TaskType::kWorker, 1}));
}

}  // namespace
TEST(TaskTest, ParsesOnlyTheNamesToStringWrites) {
  EXPECT_EQ(ParseTaskName("worker-1"), (TaskId{TaskType::kWorker, 1}));
  EXPECT_EQ(ParseTaskName("ps-0"), (TaskId{TaskType::kPs, 0}));
  for (const char* bad : {"ps", "ps-", "ps--1", "ps-01", "ps-+1", "Ps-1",
                          "psctl", "ps-1 at h:1", "-1"}) {
    EXPECT_EQ(ParseTaskName(bad), std::nullopt) << bad;
  }
}

}  // namespace psflow
