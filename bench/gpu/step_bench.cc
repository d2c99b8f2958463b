// step_bench: a worker's training-step throughput on one device, without
// the parameter servers. One step is what the trainer does between a pull
// and a push:
//
//   upload the parameters from host staging buffers (Device::AllocateHost,
//   page-locked on CUDA), upload the batch (ordinary memory, as BatchStream
//   gives it), forward, backward, download every gradient into host staging
//   buffers, read the batch's loss and accuracy.
//
// No optimizer and no network: those run on the parameter servers. Inputs
// are synthetic (uniform pixels, uniform labels) and cycle over 8 batches.
// bench/gpu/torch_step_bench.py does the same step in PyTorch eager.
//
//   step_bench --device=cuda --model=default   # 784-256-10, batch 64
//   step_bench --device=cuda --model=large     # 784-4096-4096-10, batch 1024
//   step_bench --device=cpu --model=default --cpu_threads=1
//
// Prints one "RESULT ..." line per run with examples/s (median of
// --repeats timed runs of --steps steps each, after --warmup steps).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/process_setup.h"
#include "common/status_macros.h"
#include "model/device/cuda_backend.h"
#include "model/device/select_device.h"
#include "model/initializer.h"
#include "model/registry.h"

ABSL_FLAG(std::string, device, "auto", "auto, cpu or cuda");
ABSL_FLAG(std::string, model, "default",
          "default (784-256-10, batch 64), large (784-4096-4096-10, batch "
          "1024) or custom (--input, --hidden, --classes, --batch)");
ABSL_FLAG(int, input, 784, "custom model: input width");
ABSL_FLAG(std::string, hidden, "256", "custom model: hidden widths, a,b,...");
ABSL_FLAG(int, classes, 10, "custom model: classes");
ABSL_FLAG(int, batch, 64, "custom model: batch size");
ABSL_FLAG(int, steps, 0, "timed steps per run; 0 picks by model");
ABSL_FLAG(int, warmup, 20, "untimed steps first");
ABSL_FLAG(int, repeats, 5, "timed runs; the median is reported");
ABSL_FLAG(int, cpu_threads, 1, "OpenBLAS threads for --device=cpu");
ABSL_FLAG(bool, allow_tf32, false, "CUDA: TF32 tensor-core GEMMs");

namespace psflow::bench {
namespace {

// An MLP: input width, hidden widths, classes (ReLU), and how to time it.
struct Setup {
  std::string name;
  int64_t input = 0;
  std::vector<int64_t> hidden;
  int64_t classes = 0;
  int64_t batch = 0;
  int steps = 0;
};

absl::StatusOr<Setup> SetupFromFlags() {
  const std::string model = absl::GetFlag(FLAGS_model);
  if (model == "default") {
    return Setup{"default", 784, {256}, 10, 64, 2000};
  }
  if (model == "large") {
    return Setup{"large", 784, {4096, 4096}, 10, 1024, 100};
  }
  if (model != "custom") {
    return absl::InvalidArgumentError(
        "--model must be default, large or "
        "custom, not " +
        model);
  }
  Setup setup{"custom",
              absl::GetFlag(FLAGS_input),
              {},
              absl::GetFlag(FLAGS_classes),
              absl::GetFlag(FLAGS_batch),
              200};
  for (absl::string_view width :
       absl::StrSplit(absl::GetFlag(FLAGS_hidden), ',', absl::SkipEmpty())) {
    int64_t w = 0;
    if (!absl::SimpleAtoi(width, &w)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--hidden: \"", width, "\" is not a width"));
    }
    setup.hidden.push_back(w);
  }
  return setup;
}

absl::StatusOr<std::unique_ptr<Device>> DeviceFromFlags() {
  if (absl::GetFlag(FLAGS_device) == "cuda") {
    CudaBackendOptions options;
    options.allow_tf32 = absl::GetFlag(FLAGS_allow_tf32);
    return OpenCudaBackend(options);
  }
  return SelectDevice(absl::GetFlag(FLAGS_device),
                      absl::GetFlag(FLAGS_cpu_threads));
}

// Host staging buffers on `device`, one per variable.
absl::StatusOr<std::vector<std::shared_ptr<HostBuffer>>> Staging(
    Device& device, const std::vector<std::vector<float>>& values_list) {
  std::vector<std::shared_ptr<HostBuffer>> buffers;
  for (const auto& values : values_list) {
    ASSIGN_OR_RETURN(auto buffer, device.AllocateHost(values.size()));
    std::copy(values.begin(), values.end(), buffer->span().begin());
    buffers.push_back(std::move(buffer));
  }
  return buffers;
}

absl::Status Run() {
  ASSIGN_OR_RETURN(Setup setup, SetupFromFlags());
  ASSIGN_OR_RETURN(std::unique_ptr<Device> device, DeviceFromFlags());
  const int steps =
      absl::GetFlag(FLAGS_steps) > 0 ? absl::GetFlag(FLAGS_steps) : setup.steps;
  // Through the registry, as a job would build it.
  ModelConfig config;
  for (int64_t w : setup.hidden) config.mutable_mlp()->add_hidden_sizes(w);
  if (setup.hidden.empty()) config.mutable_softmax_regression();
  ASSIGN_OR_RETURN(
      auto definition,
      DefineModel(config, InputSpec{{setup.input}, setup.classes}));
  ASSIGN_OR_RETURN(auto model,
                   definition->Instantiate(device.get(), setup.batch));
  const auto initial = InitialValues(definition->variables(), 1);
  ASSIGN_OR_RETURN(auto params, Staging(*device, initial));
  ASSIGN_OR_RETURN(auto grads, Staging(*device, initial));
  std::vector<absl::Span<const float>> param_spans;
  std::vector<absl::Span<float>> grad_spans;
  for (auto& p : params) param_spans.push_back(p->span());
  for (auto& g : grads) grad_spans.push_back(g->span());

  constexpr int kBatches = 8;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> pixel(0, 1);
  std::uniform_int_distribution<int32_t> label(
      0, static_cast<int32_t>(setup.classes - 1));
  std::vector<std::vector<float>> features(kBatches);
  std::vector<std::vector<int32_t>> labels(kBatches);
  for (int b = 0; b < kBatches; ++b) {
    features[b].resize(setup.batch * setup.input);
    labels[b].resize(setup.batch);
    for (float& x : features[b]) x = pixel(rng);
    for (int32_t& y : labels[b]) y = label(rng);
  }
  int64_t step = 0;
  double loss = 0;
  auto one_step = [&]() -> absl::Status {
    const int b = step++ % kBatches;
    RETURN_IF_ERROR(model->LoadParameters(param_spans));
    ASSIGN_OR_RETURN(
        BatchStats stats,
        model->TrainStep({setup.batch, features[b], labels[b]}, grad_spans));
    loss = stats.loss_sum / stats.examples;
    return absl::OkStatus();
  };
  for (int i = 0; i < absl::GetFlag(FLAGS_warmup); ++i) {
    RETURN_IF_ERROR(one_step());
  }
  std::vector<double> rates;
  for (int r = 0; r < std::max(1, absl::GetFlag(FLAGS_repeats)); ++r) {
    const absl::Time start = absl::Now();
    for (int i = 0; i < steps; ++i) RETURN_IF_ERROR(one_step());
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    rates.push_back(steps * setup.batch / seconds);
  }
  std::vector<double> sorted = rates;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  std::printf(
      "RESULT step_bench model=%s layers=%lld-%s-%lld batch=%lld device=\"%s\" "
      "steps=%d examples_per_sec=%.0f step_ms=%.4f runs=%s loss=%.4f\n",
      setup.name.c_str(), static_cast<long long>(setup.input),
      absl::StrJoin(setup.hidden, "-").c_str(),
      static_cast<long long>(setup.classes),
      static_cast<long long>(setup.batch), device->Describe().c_str(), steps,
      median, 1000.0 * setup.batch / median,
      absl::StrJoin(rates, ",",
                    [](std::string* out, double r) {
                      absl::StrAppend(out, static_cast<int64_t>(r));
                    })
          .c_str(),
      loss);
  return absl::OkStatus();
}

}  // namespace
}  // namespace psflow::bench

int main(int argc, char** argv) {
  psflow::SetUpProcessForBulkTransfers();
  absl::ParseCommandLine(argc, argv);
  absl::Status status = psflow::bench::Run();
  if (!status.ok()) {
    std::fprintf(stderr, "step_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
