#include "ps/lr_schedule.h"

#include <cmath>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;
using Kind = LrScheduleConfig::Kind;

LrScheduleConfig Constant(double lr, int64_t warmup_steps = 0) {
  LrScheduleConfig c;
  c.kind = Kind::kConstant;
  c.learning_rate = lr;
  c.warmup_steps = warmup_steps;
  return c;
}

LrScheduleConfig Exponential(double lr, int64_t decay_steps, double rate,
                             bool staircase = false) {
  LrScheduleConfig c;
  c.kind = Kind::kExponential;
  c.learning_rate = lr;
  c.decay_steps = decay_steps;
  c.decay_rate = rate;
  c.staircase = staircase;
  return c;
}

LrScheduleConfig Cosine(double lr, int64_t decay_steps, double alpha,
                        int64_t warmup_steps = 0) {
  LrScheduleConfig c;
  c.kind = Kind::kCosine;
  c.learning_rate = lr;
  c.decay_steps = decay_steps;
  c.alpha = alpha;
  c.warmup_steps = warmup_steps;
  return c;
}

LrSchedule Make(const LrScheduleConfig& config) {
  absl::StatusOr<LrSchedule> schedule = LrSchedule::Create(config);
  EXPECT_OK(schedule);
  return *schedule;
}

TEST(LrScheduleTest, ConstantIsConstant) {
  LrSchedule s = Make(Constant(0.05));
  EXPECT_DOUBLE_EQ(s.At(0), 0.05);
  EXPECT_DOUBLE_EQ(s.At(1000000), 0.05);
}

TEST(LrScheduleTest, ExponentialDecayIsSmooth) {
  LrSchedule s = Make(Exponential(0.1, 100, 0.5));
  EXPECT_DOUBLE_EQ(s.At(0), 0.1);
  EXPECT_NEAR(s.At(50), 0.1 * 0.70710678118654757, 1e-15);  // 0.5^0.5
  EXPECT_NEAR(s.At(200), 0.025, 1e-15);
}

TEST(LrScheduleTest, StaircaseDecaysInSteps) {
  LrSchedule s = Make(Exponential(0.1, 100, 0.5, /*staircase=*/true));
  EXPECT_DOUBLE_EQ(s.At(99), 0.1);
  EXPECT_DOUBLE_EQ(s.At(100), 0.05);
  EXPECT_DOUBLE_EQ(s.At(250), 0.025);
}

TEST(LrScheduleTest, CosineGoesFromTheRateToAlphaAndStays) {
  LrSchedule s = Make(Cosine(1.0, 100, 0.1));
  EXPECT_DOUBLE_EQ(s.At(0), 1.0);
  EXPECT_NEAR(s.At(50), 0.1 + 0.9 * 0.5, 1e-12);
  EXPECT_NEAR(s.At(100), 0.1, 1e-12);
  EXPECT_NEAR(s.At(5000), 0.1, 1e-12);
}

TEST(LrScheduleTest, WarmupRampsLinearlyThenHandsOver) {
  LrSchedule s = Make(Constant(0.4, /*warmup_steps=*/4));
  EXPECT_DOUBLE_EQ(s.At(0), 0.1);
  EXPECT_DOUBLE_EQ(s.At(1), 0.2);
  EXPECT_DOUBLE_EQ(s.At(3), 0.4);
  EXPECT_DOUBLE_EQ(s.At(4), 0.4);
}

TEST(LrScheduleTest, WarmupComposesWithDecay) {
  LrSchedule s = Make(Cosine(1.0, 10, 0.0, /*warmup_steps=*/2));
  EXPECT_NEAR(s.At(0), 0.5, 1e-12);
  EXPECT_NEAR(s.At(1), 0.5 * (1 + std::cos(M_PI * 0.1)), 1e-12);
}

TEST(LrScheduleTest, BadValuesNameTheField) {
  EXPECT_THAT(LrSchedule::Create(Constant(0)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("learning_rate is 0")));
  EXPECT_THAT(LrSchedule::Create(Constant(NAN)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("learning_rate is nan")));
  EXPECT_THAT(LrSchedule::Create(Exponential(0.1, 0, 0.5)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("decay_steps is 0")));
  EXPECT_THAT(LrSchedule::Create(Exponential(0.1, 10, -1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("decay_rate is -1")));
  EXPECT_THAT(
      LrSchedule::Create(Cosine(0.1, 10, 2)),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("alpha is 2")));
  EXPECT_THAT(LrSchedule::Create(Constant(0.1, -3)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("warmup_steps is -3")));
}

}  // namespace
}  // namespace psflow
