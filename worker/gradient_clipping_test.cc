#include "worker/gradient_clipping.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::Pointwise;

GradientClipping Norm(double n) {
  GradientClipping c;
  c.set_clip_norm(n);
  return c;
}

TEST(GradientClipperTest, NothingConfiguredClipsNothing) {
  GradientClipper clipper{GradientClipping()};
  EXPECT_FALSE(clipper.enabled());
  std::vector<float> g = {300, -400};
  EXPECT_FALSE(clipper.ClipOne(absl::MakeSpan(g)));
  clipper.ClipRest({absl::MakeSpan(g)}, {}, {});
  EXPECT_THAT(g, ElementsAre(300, -400));
  EXPECT_EQ(clipper.clipped_steps(), 0);
}

TEST(GradientClipperTest, ANormAboveTheBoundIsScaledToIt) {
  GradientClipper clipper(Norm(1.0));
  EXPECT_TRUE(clipper.streams());
  std::vector<float> big = {3, -4};  // norm 5
  EXPECT_TRUE(clipper.ClipOne(absl::MakeSpan(big)));
  EXPECT_THAT(big, Pointwise(FloatNear(1e-6), {0.6f, -0.8f}));
  std::vector<float> small = {0.3f, 0.4f};  // norm 0.5: unchanged
  EXPECT_FALSE(clipper.ClipOne(absl::MakeSpan(small)));
  EXPECT_THAT(small, ElementsAre(0.3f, 0.4f));
}

TEST(GradientClipperTest, ValuesAreClampedThenTheNormChecked) {
  GradientClipping config;
  config.set_clip_value(2);
  config.set_clip_norm(2);
  GradientClipper clipper(config);
  std::vector<float> g = {10, -10, 1};  // clamped to {2, -2, 1}: norm 3
  EXPECT_TRUE(clipper.ClipOne(absl::MakeSpan(g)));
  EXPECT_THAT(g, Pointwise(FloatNear(1e-6), {4.0f / 3, -4.0f / 3, 2.0f / 3}));
}

TEST(GradientClipperTest, TheGlobalNormCountsRowsAndDoesNotStream) {
  GradientClipping config;
  config.set_global_clip_norm(1);
  GradientClipper clipper(config);
  EXPECT_FALSE(clipper.streams());
  std::vector<float> dense = {3}, rows = {4};  // together norm 5
  clipper.ClipRest({absl::MakeSpan(dense)}, {}, {absl::MakeSpan(rows)});
  EXPECT_THAT(dense, ElementsAre(FloatNear(0.6f, 1e-6)));
  EXPECT_THAT(rows, ElementsAre(FloatNear(0.8f, 1e-6)));
  EXPECT_EQ(clipper.clipped_steps(), 1);
  dense = {0.3f};
  rows = {0.4f};
  clipper.ClipRest({absl::MakeSpan(dense)}, {}, {absl::MakeSpan(rows)});
  EXPECT_EQ(clipper.clipped_steps(), 1) << "norm 0.5 is within the bound";
  EXPECT_THAT(dense, ElementsAre(0.3f));
}

TEST(GradientClipperTest, SpansClippedEarlyAreNotClippedTwice) {
  GradientClipper clipper(Norm(1));
  std::vector<float> early = {3, 4}, late = {0, 10};
  ASSERT_TRUE(clipper.ClipOne(absl::MakeSpan(early)));
  clipper.NoteClipped();
  // A second clip would leave it unchanged anyway, so mark it by hand:
  // the step's end must skip it and clip only the rest.
  early = {30, 40};
  clipper.ClipRest({absl::MakeSpan(early), absl::MakeSpan(late)}, {true, false},
                   {});
  EXPECT_THAT(early, ElementsAre(30, 40));
  EXPECT_THAT(late, Pointwise(FloatNear(1e-6), {0.0f, 1.0f}));
  EXPECT_EQ(clipper.clipped_steps(), 1);
}

TEST(GradientClipperTest, NonFiniteGradientsAreLeftForTheServersToRefuse) {
  GradientClipping config;
  config.set_clip_norm(1);
  config.set_clip_value(1);
  config.set_global_clip_norm(1);
  GradientClipper clipper(config);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> g = {nan, 5}, h = {inf, 5};
  EXPECT_FALSE(clipper.ClipOne(absl::MakeSpan(g)));
  clipper.ClipRest({absl::MakeSpan(g), absl::MakeSpan(h)}, {}, {});
  EXPECT_TRUE(std::isnan(g[0]));
  EXPECT_EQ(g[1], 5);
  EXPECT_TRUE(std::isinf(h[0]));
  EXPECT_EQ(h[1], 5);
}

TEST(GradientClipperTest, HugeFiniteGradientsComeOutFinite) {
  GradientClipper clipper(Norm(1));
  // Their squares overflow float, not the double sum.
  std::vector<float> g(1000, 3e38f);
  EXPECT_TRUE(clipper.ClipOne(absl::MakeSpan(g)));
  const double norm = std::sqrt(SumOfSquares(g));
  EXPECT_NEAR(norm, 1.0, 1e-5);
}

}  // namespace
}  // namespace psflow
