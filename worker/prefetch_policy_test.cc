#include "worker/prefetch_policy.h"

#include "gtest/gtest.h"

namespace psflow {
namespace {

constexpr absl::Duration kCompute = absl::Milliseconds(20);

// Runs `steps` steps through the policy, each fresh one waiting `wait`;
// returns how many of them prefetched.
int RunSteps(PrefetchPolicy& policy, int steps, absl::Duration wait) {
  int prefetched = 0;
  for (int i = 0; i < steps; ++i) {
    if (policy.PrefetchThisStep()) {
      ++prefetched;
    } else {
      policy.ObserveFreshStep(kCompute, wait);
    }
  }
  return prefetched;
}

TEST(PrefetchPolicyTest, AlwaysAndNeverIgnoreTheWire) {
  PrefetchPolicy always(PrefetchPolicy::Choice::kAlways);
  PrefetchPolicy never(PrefetchPolicy::Choice::kNever);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_TRUE(always.PrefetchThisStep());
    EXPECT_FALSE(never.PrefetchThisStep());
    never.ObserveFreshStep(kCompute, absl::Milliseconds(100));
  }
  EXPECT_FALSE(never.prefetching());
}

TEST(PrefetchPolicyTest, AutoPullsFreshWhileTheWireIsCheap) {
  PrefetchPolicy policy(PrefetchPolicy::Choice::kAuto);
  EXPECT_EQ(policy.wait_share(), -1);
  EXPECT_EQ(RunSteps(policy, 2000, absl::Microseconds(200)), 0);
  EXPECT_NEAR(policy.wait_share(), 0.01, 1e-9);
}

TEST(PrefetchPolicyTest, AutoPrefetchesOnceTheWaitCostsAndProbesNowAndThen) {
  PrefetchPolicy policy(PrefetchPolicy::Choice::kAuto);
  // The first decision comes after kMeasureSteps fresh steps.
  EXPECT_EQ(RunSteps(policy, PrefetchPolicy::kMeasureSteps - 1,
                     absl::Milliseconds(6)),
            0);
  EXPECT_FALSE(policy.prefetching());
  EXPECT_EQ(RunSteps(policy, 1, absl::Milliseconds(6)), 0);
  EXPECT_TRUE(policy.prefetching());
  // From then on one fresh probe per kProbeEvery prefetched steps.
  const int cycles = 5;
  const int steps = cycles * (PrefetchPolicy::kProbeEvery + 1);
  EXPECT_EQ(RunSteps(policy, steps, absl::Milliseconds(6)), steps - cycles);
  EXPECT_TRUE(policy.prefetching());
}

TEST(PrefetchPolicyTest, AutoGoesBackToFreshPullsWhenAProbeFindsTheWireCheap) {
  PrefetchPolicy policy(PrefetchPolicy::Choice::kAuto);
  RunSteps(policy, PrefetchPolicy::kMeasureSteps, absl::Milliseconds(6));
  ASSERT_TRUE(policy.prefetching());
  // Prefetched steps up to each probe, and kProbesToDecide probes that
  // find 0.5% of the compute.
  const int probes = PrefetchPolicy::kProbesToDecide;
  EXPECT_EQ(RunSteps(policy, probes * (PrefetchPolicy::kProbeEvery + 1),
                     absl::Microseconds(100)),
            probes * PrefetchPolicy::kProbeEvery);
  EXPECT_FALSE(policy.prefetching());
  EXPECT_EQ(RunSteps(policy, 100, absl::Microseconds(100)), 0);
}

TEST(PrefetchPolicyTest, OneCheapProbeAmongCostlyOnesDoesNotDecide) {
  PrefetchPolicy policy(PrefetchPolicy::Choice::kAuto);
  RunSteps(policy, PrefetchPolicy::kMeasureSteps, absl::Milliseconds(6));
  ASSERT_TRUE(policy.prefetching());
  // Probes alternate: one finds the server idle (0.5%), the next 30%.
  int prefetched = 0, steps = 0;
  for (int probe = 0; probe < 20; ++probe) {
    const absl::Duration wait =
        probe % 2 == 0 ? absl::Microseconds(100) : absl::Milliseconds(6);
    prefetched += RunSteps(policy, PrefetchPolicy::kProbeEvery + 1, wait);
    steps += PrefetchPolicy::kProbeEvery + 1;
    EXPECT_TRUE(policy.prefetching()) << "after probe " << probe;
  }
  // Only the probes themselves were fresh.
  EXPECT_EQ(prefetched, steps - 20);
}

TEST(PrefetchPolicyTest, OneSlowFreshStepDoesNotDecide) {
  PrefetchPolicy policy(PrefetchPolicy::Choice::kAuto);
  // The first step also sets up the connections: 5x its compute.
  policy.ObserveFreshStep(kCompute, 5 * kCompute);
  EXPECT_EQ(RunSteps(policy, 1000, absl::Microseconds(200)), 0);
}

TEST(PrefetchPolicyTest, AutoKeepsItsChoiceBetweenTheThresholds) {
  // 7.5% of the compute: not enough to start prefetching...
  PrefetchPolicy fresh(PrefetchPolicy::Choice::kAuto);
  EXPECT_EQ(RunSteps(fresh, 1000, absl::Microseconds(1500)), 0);
  // ...nor to stop once prefetching.
  PrefetchPolicy prefetching(PrefetchPolicy::Choice::kAuto);
  RunSteps(prefetching, PrefetchPolicy::kMeasureSteps, absl::Milliseconds(6));
  ASSERT_TRUE(prefetching.prefetching());
  RunSteps(prefetching, 4 * (PrefetchPolicy::kProbeEvery + 1),
           absl::Microseconds(1500));
  EXPECT_TRUE(prefetching.prefetching());
}

TEST(PrefetchPolicyTest, AZeroComputeStepDoesNotDivideByZero) {
  PrefetchPolicy policy(PrefetchPolicy::Choice::kAuto);
  for (int i = 0; i < PrefetchPolicy::kMeasureSteps; ++i) {
    policy.ObserveFreshStep(absl::ZeroDuration(), absl::Milliseconds(1));
  }
  EXPECT_TRUE(policy.prefetching());
}

}  // namespace
}  // namespace psflow
