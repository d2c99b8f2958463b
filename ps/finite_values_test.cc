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

// Across several copy blocks, a bad value in any of them (the first, a
// middle one, the short last one) is found, and the copy is whole.
TEST(FiniteValuesTest, CopyAllFiniteCopiesEverythingAndFindsAnyBadValue) {
  const size_t n = 3 * 16 * 1024 + 5;
  std::vector<float> from(n);
  for (size_t i = 0; i < n; ++i) from[i] = static_cast<float>(i) * 0.25f;
  std::vector<float> to(n);
  EXPECT_TRUE(CopyAllFinite(from, absl::MakeSpan(to)));
  EXPECT_EQ(to, from);
  for (size_t bad : {size_t{0}, size_t{16 * 1024 + 3}, n - 1}) {
    std::vector<float> poisoned = from;
    poisoned[bad] = kNan;
    std::vector<float> out(n);
    EXPECT_FALSE(CopyAllFinite(poisoned, absl::MakeSpan(out))) << bad;
    EXPECT_TRUE(std::isnan(out[bad]));
    EXPECT_EQ(out[n / 2], poisoned[n / 2]);
  }
}

TEST(FiniteValuesTest, EmptyCopyIsFinite) {
  EXPECT_TRUE(CopyAllFinite({}, {}));
}

}  // namespace
}  // namespace psflow
