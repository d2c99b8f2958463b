#include "model/memory_estimate.h"

#include <unistd.h>

#include <fstream>
#include <memory>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/device/cpu/cpu_device.h"
#include "model/registry.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

const InputSpec kImages{{28, 28}, 10};

// `convs` Conv2D layers of `filters` 3x3 "same" filters, then a dense
// classifier.
ModelConfig Convnet(int convs, int filters) {
  ModelConfig config;
  for (int i = 0; i < convs; ++i) {
    LayerConfig::Conv2D* conv = config.add_layers()->mutable_conv2d();
    conv->set_filters(filters);
    conv->add_kernel_size(3);
    conv->set_padding("same");
    conv->set_activation("relu");
  }
  config.add_layers()->mutable_flatten();
  config.add_layers()->mutable_dense()->set_units(10);
  return config;
}

int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

TEST(MemoryEstimateTest, ConvolutionsCountTheirPatches) {
  ASSERT_OK_AND_ASSIGN(auto model, DefineModel(Convnet(2, 8), kImages));
  const int64_t pixels = 28 * 28;
  // Per example: the input; each conv's output and gradient (28x28x8) and
  // its patches and their gradient (28x28 x 3x3xC); flatten's and dense's
  // outputs and gradients.
  const int64_t outputs =
      pixels + 2 * pixels * 8 + 2 * pixels * 8 + 2 * pixels * 8 + 2 * 10;
  const int64_t patches_1 = pixels * 9 * 1, patches_8 = pixels * 9 * 8;
  // Each conv's patch groups on the CPU backend's one thread: a group of
  // images of at most 128K floats of patches, and their gradient.
  const int64_t groups = 2 * 2 * kCpuConvolutionGroupFloats;
  // And each conv's kernel-gradient partial sums: 8 kernels' worth.
  const int64_t partials = kCpuConvolutionMaxPartials * (9 * 1 * 8 + 9 * 8 * 8);
  {
    const MemoryEstimate e = EstimateMemory(*model, 1, /*optimizer_slots=*/2);
    EXPECT_EQ(
        e.activation_bytes,
        (outputs + 2 * patches_1 + 2 * patches_8 + groups + partials) * 4);
  }
  // At 10 examples the second conv's patch matrix (564,480 floats) passes
  // what the CPU backend builds whole, so it counts that much, twice.
  const MemoryEstimate e = EstimateMemory(*model, 10, /*optimizer_slots=*/2);
  ASSERT_GT(patches_8 * 10, kCpuWholeConvolutionFloats);
  EXPECT_EQ(e.activation_bytes,
            (outputs * 10 + 2 * patches_1 * 10 +
             2 * kCpuWholeConvolutionFloats + partials + groups) *
                4);
  const int64_t parameters =
      (9 * 1 * 8 + 8) + (9 * 8 * 8 + 8) + (pixels * 8 * 10 + 10);
  EXPECT_EQ(e.parameter_bytes, parameters * kWorkerCopiesPerParameter * 4);
  EXPECT_EQ(e.server_bytes, parameters * 3 * 4);
  ASSERT_EQ(e.largest.size(), 3u);
  EXPECT_EQ(e.largest[0].name, "conv2d_1");  // the 8-channel patches
}

// One 64x64-window convolution of 2 filters ("same"), then a dense layer.
ModelConfig WideWindow() {
  ModelConfig config;
  LayerConfig::Conv2D* conv = config.add_layers()->mutable_conv2d();
  conv->set_filters(2);
  conv->add_kernel_size(64);
  conv->set_padding("same");
  config.add_layers()->mutable_flatten();
  config.add_layers()->mutable_dense()->set_units(10);
  return config;
}

// A window so large that one image's patches exceed any group: each CPU
// thread holds that image's patches and their gradient, whatever the
// batch (a 4096 x 4096 window aborted a worker the estimate said fit).
TEST(MemoryEstimateTest, AWideWindowCountsOneImagesPatchesPerThread) {
  ASSERT_OK_AND_ASSIGN(auto model, DefineModel(WideWindow(), kImages));
  const int64_t image_patches = 28 * 28 * 64 * 64;
  ASSERT_GT(image_patches, kCpuWholeConvolutionFloats);
  const MemoryEstimate one = EstimateMemory(*model, 2, 0, /*threads=*/1);
  const MemoryEstimate four = EstimateMemory(*model, 2, 0, /*threads=*/4);
  EXPECT_EQ(four.activation_bytes - one.activation_bytes,
            3 * 2 * image_patches * 4);
  EXPECT_GT(one.activation_bytes, 2 * image_patches * 4);
}

// The chief scores the final model itself on its host's cores: its
// evaluation is estimated for those threads, not the workers' cpu_threads
// (each holds an image's patches).
TEST(MemoryEstimateTest, TheEvaluationCountsTheThreadsItRunsOn) {
  ASSERT_OK_AND_ASSIGN(auto model, DefineModel(WideWindow(), kImages));
  JobConfig job;
  job.mutable_evaluation()->set_batch_size(2);
  const int64_t image_patches = 28 * 28 * 64 * 64;
  const MemoryEstimate workers = EstimateEvaluationMemory(*model, job, 100);
  const MemoryEstimate chief =
      EstimateEvaluationMemory(*model, job, 100, /*threads=*/4);
  EXPECT_EQ(chief.activation_bytes - workers.activation_bytes,
            3 * 2 * image_patches * 4);
}

// The estimate follows what the model really allocates: a CPU model's
// resident memory grows by its activations and two copies of the
// parameters (values and gradients; the trainer holds the other three).
TEST(MemoryEstimateTest, MatchesWhatAModelAllocates) {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  // (The normal build runs it.)
  GTEST_SKIP() << "a sanitizer's shadow memory (and ASan's redzones) grows "
                  "with every page the model touches: resident memory says "
                  "nothing here";
#endif
  ASSERT_OK_AND_ASSIGN(auto definition, DefineModel(Convnet(4, 16), kImages));
  // Outputs dominate: the CPU backend caps each conv's patches at 2 x 2 MiB.
  const int64_t batch = 192;
  const MemoryEstimate e = EstimateMemory(*definition, batch, 0);
  const int64_t expected =
      e.activation_bytes + e.parameter_bytes / kWorkerCopiesPerParameter * 2;
  ASSERT_GT(expected, int64_t{100} << 20);  // large enough to measure
  std::unique_ptr<Device> device = CreateCpuDevice(1);
  const int64_t before = ResidentBytes();
  ASSERT_OK_AND_ASSIGN(auto model,
                       definition->Instantiate(device.get(), batch));
  const int64_t grown = ResidentBytes() - before;
  EXPECT_GT(grown, expected * 8 / 10)
      << FormatBytes(grown) << " vs " << FormatBytes(expected);
  EXPECT_LT(grown, expected * 12 / 10)
      << FormatBytes(grown) << " vs " << FormatBytes(expected);
}

// The job that grew a worker to 9.4 GB: 300 Conv2D layers (5 GiB of
// outputs and gradients at batch 64 now that the CPU backend caps each
// one's patches).
TEST(MemoryEstimateTest, AModelThatCannotFitIsRefusedNamingItsLayers) {
  ASSERT_OK_AND_ASSIGN(auto model, DefineModel(Convnet(300, 32), kImages));
  JobConfig job;
  job.mutable_training()->set_batch_size(64);
  job.mutable_optimizer()->set_kind(OptimizerConfig::ADAM);
  const MemoryEstimate e = EstimateJobMemory(*model, job);
  EXPECT_GT(e.worker_bytes(), int64_t{5} << 30);
  EXPECT_THAT(
      CheckJobMemory(e, job, 1, int64_t{4} << 30, "this host's memory"),
      StatusIs(absl::StatusCode::kResourceExhausted,
               AllOf(HasSubstr("does not fit in memory"),
                     HasSubstr("more than the 4.0 GiB of this host's memory"),
                     HasSubstr("conv2d_"), HasSubstr("training.batch_size"))));
  // A worker's declared memory is checked too, whatever the host has.
  ASSERT_OK_AND_ASSIGN(auto small, DefineModel(Convnet(2, 8), kImages));
  JobConfig tight = job;
  tight.mutable_training()->set_worker_memory_mib(100);
  EXPECT_THAT(CheckJobMemory(EstimateJobMemory(*small, tight), tight, 1,
                             int64_t{64} << 30, "this host's memory"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("training.worker_memory_mib")));
  EXPECT_OK(CheckJobMemory(EstimateJobMemory(*small, job), job, 2,
                           int64_t{64} << 30, "this host's memory"));
  // Several workers on one host share it.
  EXPECT_THAT(CheckJobMemory(EstimateJobMemory(*small, job), job, 64,
                             int64_t{4} << 30, "this host's memory"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("64 workers need")));
}

}  // namespace
}  // namespace psflow
