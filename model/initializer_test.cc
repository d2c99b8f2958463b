#include "model/initializer.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::Each;

ModelVariable Var(std::vector<int64_t> shape, Initializer initializer) {
  return ModelVariable{{"v", std::move(shape)}, initializer};
}

TEST(InitializerTest, ConstantsDrawNothingFromTheStream) {
  // A zeros variable between two Glorot ones leaves the second unchanged.
  auto with = InitialValues(
      {Var({4, 3}, Initializer::kGlorotUniform), Var({3}, Initializer::kZeros),
       Var({3, 2}, Initializer::kGlorotUniform)},
      7);
  auto without = InitialValues({Var({4, 3}, Initializer::kGlorotUniform),
                                Var({3, 2}, Initializer::kGlorotUniform)},
                               7);
  EXPECT_EQ(with[0], without[0]);
  EXPECT_EQ(with[2], without[1]);
  EXPECT_THAT(with[1], Each(0.0f));
  EXPECT_THAT(InitialValues({Var({5}, Initializer::kOnes)}, 1)[0], Each(1.0f));
}

TEST(InitializerTest, GlorotCountsAConvolutionWindowInBothFans) {
  // [3, 3, 2, 4]: fan_in 3*3*2 = 18, fan_out 3*3*4 = 36.
  const double limit = std::sqrt(6.0 / (18 + 36));
  auto values =
      InitialValues({Var({3, 3, 2, 4}, Initializer::kGlorotUniform)}, 3)[0];
  ASSERT_EQ(values.size(), 72u);
  double largest = 0;
  for (float x : values) largest = std::max(largest, std::fabs(double{x}));
  EXPECT_LE(largest, limit);
  EXPECT_GT(largest, 0.5 * limit);
}

TEST(InitializerTest, TheSeedDecides) {
  auto spec = {Var({10, 10}, Initializer::kGlorotUniform)};
  EXPECT_EQ(InitialValues(spec, 1), InitialValues(spec, 1));
  EXPECT_NE(InitialValues(spec, 1), InitialValues(spec, 2));
}

}  // namespace
}  // namespace psflow
