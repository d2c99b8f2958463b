#include "model/device/cpu/blas_kernels.h"

#include "gtest/gtest.h"

namespace psflow {
namespace {

TEST(BlasKernelsTest, GenericKernelsOnACapableCpuAreReplaced) {
  const CpuFeatures avx512{true, true};
  const CpuFeatures avx2{true, false};
  EXPECT_EQ(BetterBlasKernels("Prescott", avx512), "SkylakeX");
  EXPECT_EQ(BetterBlasKernels("Prescott", avx2), "Haswell");
  EXPECT_EQ(BetterBlasKernels("Core2", avx2), "Haswell");
  EXPECT_EQ(BetterBlasKernels("Sandybridge", avx2), "Haswell");
  EXPECT_EQ(BetterBlasKernels("Nehalem", avx512), "SkylakeX");
}

TEST(BlasKernelsTest, FitKernelsAndOlderCpusAreLeftAlone) {
  const CpuFeatures avx512{true, true};
  const CpuFeatures none{false, false};
  for (const char* fit : {"Haswell", "Zen", "SkylakeX", "Cooperlake",
                          "SapphireRapids", "haswell"}) {
    EXPECT_EQ(BetterBlasKernels(fit, avx512), std::nullopt) << fit;
  }
  EXPECT_EQ(BetterBlasKernels("Prescott", none), std::nullopt);
  EXPECT_EQ(BetterBlasKernels("", avx512), std::nullopt);
}

TEST(BlasKernelsTest, OpenBlasNamesItsKernels) {
  // The dynamic-arch build Debian ships says which kernels it chose.
  EXPECT_FALSE(BlasKernels().empty());
}

}  // namespace
}  // namespace psflow
