#include "common/float_mode.h"

#include <atomic>
#include <limits>
#include <thread>

#include "gtest/gtest.h"

namespace psflow {
namespace {

// Read through a volatile so the compiler cannot fold the arithmetic.
float Halve(float x) {
  volatile float v = x;
  return v * 0.5f;
}

TEST(FloatModeTest, SubnormalsAreFlushedOnlyWhenEnabled) {
  const float smallest_normal = std::numeric_limits<float>::min();
  DisableFlushToZero();
  EXPECT_FALSE(FlushToZeroEnabled());
  EXPECT_GT(Halve(smallest_normal), 0.0f) << "a subnormal result is kept";
  EnableFlushToZero();
  EXPECT_TRUE(FlushToZeroEnabled());
  EXPECT_EQ(Halve(smallest_normal), 0.0f) << "a subnormal result is flushed";
  // An input that is already subnormal reads as zero (DAZ).
  DisableFlushToZero();
  volatile float subnormal = Halve(smallest_normal);
  EnableFlushToZero();
  EXPECT_EQ(subnormal * 1.0f, 0.0f);
}

TEST(FloatModeTest, ThreadsInheritTheModeOfTheThreadThatStartsThem) {
  EnableFlushToZero();
  std::atomic<bool> inherited{false};
  std::thread([&] { inherited = FlushToZeroEnabled(); }).join();
  EXPECT_TRUE(inherited);
  DisableFlushToZero();
  std::thread([&] { inherited = FlushToZeroEnabled(); }).join();
  EXPECT_FALSE(inherited);
}

TEST(FloatModeTest, EnableAfterDisableSetsTheModeAgain) {
  EnableFlushToZero();
  DisableFlushToZero();
  EnableFlushToZero();
  EXPECT_TRUE(FlushToZeroEnabled());
}

}  // namespace
}  // namespace psflow
