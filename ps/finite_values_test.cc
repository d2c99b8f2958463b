#include "ps/finite_values.h"

#include <cmath>
#include <cstring>
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

// Floats at every alignment a network buffer gives them, in vector bodies
// and scalar tails: each NaN/Inf is found wherever it lies, and the
// largest, smallest and subnormal floats pass.
TEST(FiniteValuesTest, AllFiniteAtFindsEveryNanOrInfAtAnyAlignment) {
  const std::vector<float> finite = {0.5f, -0.0f,
                                     std::numeric_limits<float>::max(),
                                     -std::numeric_limits<float>::max(),
                                     std::numeric_limits<float>::denorm_min()};
  for (size_t misalign = 0; misalign < sizeof(float); ++misalign) {
    for (size_t n : {1, 7, 8, 9, 33, 70}) {
      std::vector<float> values(n);
      for (size_t i = 0; i < n; ++i) values[i] = finite[i % finite.size()];
      std::vector<char> buffer(misalign + n * sizeof(float));
      auto place = [&] {
        std::memcpy(buffer.data() + misalign, values.data(), n * sizeof(float));
      };
      place();
      EXPECT_TRUE(AllFiniteAt(buffer.data() + misalign, n))
          << misalign << " " << n;
      for (size_t at = 0; at < n; ++at) {
        for (float bad : {kNan, -kNan, kInf, -kInf}) {
          const float kept = values[at];
          values[at] = bad;
          place();
          EXPECT_FALSE(AllFiniteAt(buffer.data() + misalign, n))
              << "misaligned by " << misalign << ", " << n << " floats, " << bad
              << " at " << at;
          values[at] = kept;
        }
      }
    }
  }
  EXPECT_TRUE(AllFiniteAt(nullptr, 0));
}

}  // namespace
}  // namespace psflow
