#include "ps/admission_sketch.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace psflow {
namespace {

TEST(AdmissionSketchTest, CountsEachIdWithoutUndercounting) {
  AdmissionSketch sketch(1 << 12);
  for (int i = 1; i <= 5; ++i) EXPECT_EQ(sketch.Add(42), i);
  EXPECT_EQ(sketch.Estimate(42), 5);
  EXPECT_EQ(sketch.Estimate(43), 0);
  // Many other ids: the estimate never falls below the true count.
  for (int64_t id = 1000; id < 3000; ++id) sketch.Add(id);
  EXPECT_GE(sketch.Estimate(42), 5);
  int64_t exact = 0;
  for (int64_t id = 1000; id < 3000; ++id) {
    const int64_t estimate = sketch.Estimate(id);
    EXPECT_GE(estimate, 1);
    if (estimate == 1) ++exact;
  }
  // 2000 ids in 4 x 4096 counters: collisions in every row are rare.
  EXPECT_GT(exact, 1950);
}

TEST(AdmissionSketchTest, OldCountsAgeOut) {
  AdmissionSketch sketch(64);
  for (int i = 0; i < 100; ++i) sketch.Add(7);
  const int64_t before = sketch.Estimate(7);
  EXPECT_GE(before, 100);
  // 8 increments per counter halve every counter.
  for (int64_t id = 100; id < 100 + 8 * 64; ++id) sketch.Add(id);
  EXPECT_LE(sketch.Estimate(7), before / 2 + 8);
}

}  // namespace
}  // namespace psflow
