#include "ps/finite_values.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace psflow {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(FiniteValuesTest, FirstNonFiniteFindsTheFirstNanOrInf) {
  std::vector<float> values(1000, 0.5f);
  EXPECT_EQ(FirstNonFinite(values), -1);
  EXPECT_TRUE(AllFinite(values));
  values[700] = -kInf;
  values[900] = kNan;
  EXPECT_EQ(FirstNonFinite(values), 700);
  EXPECT_FALSE(AllFinite(values));
}

TEST(FiniteValuesTest, LargestAndSubnormalFloatsAreFinite) {
  const std::vector<float> values = {
      std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
      std::numeric_limits<float>::denorm_min(), -0.0f};
  EXPECT_EQ(FirstNonFinite(values), -1);
  EXPECT_TRUE(AllFinite(values));
}

// Vector bodies and scalar tails alike: every value not finite, and only
// those, is read as 0.
TEST(FiniteValuesTest, FiniteOrZeroKeepsEveryFiniteValue) {
  for (float finite :
       {0.0f, -0.0f, 1.5f, -3e38f, std::numeric_limits<float>::max(),
        std::numeric_limits<float>::denorm_min()}) {
    EXPECT_EQ(FiniteOrZero(finite), finite);
  }
  EXPECT_EQ(FiniteOrZero(kNan), 0.0f);
  EXPECT_EQ(FiniteOrZero(-kNan), 0.0f);
  EXPECT_EQ(FiniteOrZero(kInf), 0.0f);
  EXPECT_EQ(FiniteOrZero(-kInf), 0.0f);
}

}  // namespace
}  // namespace psflow
