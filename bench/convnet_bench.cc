// convnet_bench: where a convnet's training step spends its time on a
// device (the CPU backend by default; --device=cuda on a GPU). For a job
// config's `layers` model (default: the Keras guide convnet of
// configs/fashion_mnist_convnet.json) on random 28x28 images:
//
//   - a whole TrainStep (forward + backward + gradients to the host), in
//     microseconds per example, median of --rounds;
//   - each layer's forward and backward pass alone, with GFLOP/s for the
//     layers that multiply (Conv2D, Dense) beside the SGEMM peak measured
//     in the same run with the same thread count.
//
//   bazel build --config=opt //bench:convnet_bench
//   bazel-bin/bench/convnet_bench --threads=1 --batch=64
//   bazel-bin/bench/convnet_bench --device=cuda --batch=64   # on a GPU
//
// bench/convnet_bench.py runs it alternately with the same model in
// PyTorch (bench/convnet_torch.py) and prints the ratio.
//
// It starts as a worker does: OpenBLAS's fast kernels where a VM hides the
// CPU model (model/device/cpu/blas_kernels.h) and flush-to-zero.
#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/float_mode.h"
#include "common/job/job_config.h"
#include "model/device/cpu/blas_kernels.h"
#include "model/device/select_device.h"
#include "model/initializer.h"
#include "model/layers/layer_factory.h"
#include "model/registry.h"

ABSL_FLAG(std::string, job, "configs/fashion_mnist_convnet.json",
          "Job config whose model.layers to measure");
ABSL_FLAG(std::string, device, "cpu", "cpu, cuda or auto");
ABSL_FLAG(int, threads, 1, "CPU backend threads");
ABSL_FLAG(int, batch, 64, "Examples per step");
ABSL_FLAG(int, steps, 30, "Training steps per round");
ABSL_FLAG(int, rounds, 5, "Rounds (the median is reported)");
ABSL_FLAG(bool, layers, true, "Also time each layer alone");
ABSL_FLAG(bool, total_only, false,
          "Print only the median microseconds per example (for drivers)");

namespace psflow {
namespace {

double Seconds(absl::Time start) {
  return absl::ToDoubleSeconds(absl::Now() - start);
}

// SGEMM GFLOP/s on this device: 1024^3, best of 3.
double SgemmPeak(Device& device) {
  const int64_t n = 1024;
  auto a = *device.Allocate(n * n), b = *device.Allocate(n * n),
       c = *device.Allocate(n * n);
  double best = 0;
  for (int r = 0; r < 4; ++r) {
    const absl::Time start = absl::Now();
    (void)device.Gemm(false, false, n, n, n, 1.0f, *a, *b, 0.0f, *c);
    if (r > 0) best = std::max(best, 2.0 * n * n * n / Seconds(start) / 1e9);
  }
  return best;
}

struct Batch {
  std::vector<float> features;
  std::vector<int32_t> labels;
};

Batch RandomBatch(int64_t size, int64_t features, int64_t classes) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> pixel(0, 255);
  std::uniform_int_distribution<int32_t> label(0, classes - 1);
  Batch b;
  b.features.resize(size * features);
  for (float& x : b.features) x = pixel(rng);
  b.labels.resize(size);
  for (int32_t& y : b.labels) y = label(rng);
  return b;
}

void TimeLayers(const ModelDefinition& definition,
                const std::vector<std::unique_ptr<Layer>>& layers,
                Device& device, int64_t batch, double peak) {
  std::printf("%-26s %9s %9s %12s %10s %10s\n", "layer", "fwd ms", "bwd ms",
              "MFLOP/ex", "fwd GF/s", "bwd GF/s");
  std::vector<std::vector<float>> values =
      InitialValues(definition.variables(), 1);
  size_t first = 0;
  double total_fwd = 0, total_bwd = 0;
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> value(-1, 1);
  for (const auto& layer : layers) {
    const size_t count = layer->variables().size();
    std::vector<std::shared_ptr<DeviceArray>> owned;
    LayerArrays arrays;
    for (size_t v = first; v < first + count; ++v) {
      auto value_array = *device.Allocate(values[v].size());
      (void)device.Upload(values[v], *value_array);
      auto gradient_array = *device.Allocate(values[v].size());
      arrays.values.push_back(value_array.get());
      arrays.gradients.push_back(gradient_array.get());
      owned.push_back(value_array);
      owned.push_back(gradient_array);
    }
    first += count;
    auto kernel = *layer->Instantiate(&device, batch, arrays);
    const int64_t in = batch * NumElements(layer->input_shape());
    const int64_t out = batch * NumElements(layer->output_shape());
    std::vector<float> host(in);
    for (float& x : host) x = value(rng);
    auto x = *device.Allocate(in), y = *device.Allocate(out),
         dy = *device.Allocate(out), dx = *device.Allocate(in);
    (void)device.Upload(host, *x);
    const StepContext step{batch, true, 1};
    const int reps = 20;
    (void)kernel->Forward(step, *x, *y);
    absl::Time start = absl::Now();
    for (int r = 0; r < reps; ++r) (void)kernel->Forward(step, *x, *y);
    (void)device.Synchronize();
    const double fwd = Seconds(start) / reps;
    start = absl::Now();
    for (int r = 0; r < reps; ++r) {
      (void)kernel->Backward(step, *x, *y, *dy, dx.get());
    }
    (void)device.Synchronize();
    const double bwd = Seconds(start) / reps;
    total_fwd += fwd;
    total_bwd += bwd;
    const double flops = 2.0 * layer->ForwardMacs();  // per example, forward
    if (flops > 0) {
      // Backward: the kernel's gradient and the input's, each one GEMM as
      // large as the forward one.
      std::printf("%-26s %9.3f %9.3f %12.3f %10.2f %10.2f\n",
                  layer->name().c_str(), fwd * 1e3, bwd * 1e3, flops / 1e6,
                  flops * batch / fwd / 1e9, 2 * flops * batch / bwd / 1e9);
    } else {
      std::printf("%-26s %9.3f %9.3f\n", layer->name().c_str(), fwd * 1e3,
                  bwd * 1e3);
    }
  }
  std::printf("%-26s %9.3f %9.3f   (SGEMM peak %.2f GFLOP/s)\n", "all layers",
              total_fwd * 1e3, total_bwd * 1e3, peak);
}

int Main() {
  absl::StatusOr<JobConfig> job = LoadJobConfigFile(absl::GetFlag(FLAGS_job));
  if (!job.ok()) {
    std::fprintf(stderr, "%s\n", std::string(job.status().message()).c_str());
    return 1;
  }
  const InputSpec input{{28, 28}, 10};
  auto definition = DefineModel(job->model(), input);
  if (!definition.ok()) {
    std::fprintf(stderr, "%s\n",
                 std::string(definition.status().message()).c_str());
    return 1;
  }
  const int threads = absl::GetFlag(FLAGS_threads);
  const int64_t batch = absl::GetFlag(FLAGS_batch);
  absl::StatusOr<std::unique_ptr<Device>> selected =
      SelectDevice(absl::GetFlag(FLAGS_device), threads);
  if (!selected.ok()) {
    std::fprintf(stderr, "%s\n",
                 std::string(selected.status().message()).c_str());
    return 1;
  }
  std::unique_ptr<Device> device = *std::move(selected);
  auto model = *(*definition)->Instantiate(device.get(), batch);
  const std::vector<std::vector<float>> values =
      InitialValues((*definition)->variables(), 1);
  (void)model->LoadParameters(
      std::vector<absl::Span<const float>>(values.begin(), values.end()));
  std::vector<std::vector<float>> gradients;
  std::vector<absl::Span<float>> spans;
  for (const auto& v : values) gradients.emplace_back(v.size());
  for (auto& g : gradients) spans.push_back(absl::MakeSpan(g));
  const Batch data = RandomBatch(batch, input.num_features(), 10);
  const ExampleBatch example{batch, data.features, data.labels, 1};

  for (int w = 0; w < 3; ++w) (void)model->TrainStep(example, spans);
  std::vector<double> rounds;
  for (int r = 0; r < absl::GetFlag(FLAGS_rounds); ++r) {
    const absl::Time start = absl::Now();
    for (int s = 0; s < absl::GetFlag(FLAGS_steps); ++s) {
      absl::StatusOr<BatchStats> stats = model->TrainStep(example, spans);
      if (!stats.ok()) {
        std::fprintf(stderr, "%s\n",
                     std::string(stats.status().message()).c_str());
        return 1;
      }
    }
    rounds.push_back(Seconds(start) / absl::GetFlag(FLAGS_steps) / batch * 1e6);
  }
  std::sort(rounds.begin(), rounds.end());
  const double median = rounds[rounds.size() / 2];
  if (absl::GetFlag(FLAGS_total_only)) {
    std::printf("%.3f\n", median);
    return 0;
  }
  std::printf("%s on %s, batch %lld\n", (*definition)->Describe().c_str(),
              device->Describe().c_str(), static_cast<long long>(batch));
  std::printf("train step: %.1f us/example (%.0f examples/s), median of %zu\n",
              median, 1e6 / median, rounds.size());
  if (absl::GetFlag(FLAGS_layers)) {
    // The same layers alone, as the model's graph builds them.
    auto layers = BuildLayers(job->model().layers(), input.example_shape,
                              input.num_classes);
    if (!layers.ok()) {
      std::fprintf(stderr, "%s\n",
                   std::string(layers.status().message()).c_str());
      return 1;
    }
    TimeLayers(**definition, *layers, *device, batch, SgemmPeak(*device));
  }
  return 0;
}

}  // namespace
}  // namespace psflow

int main(int argc, char** argv) {
  psflow::UseFastBlasKernels(argv);
  psflow::EnableFlushToZero();
  absl::ParseCommandLine(argc, argv);
  return psflow::Main();
}
