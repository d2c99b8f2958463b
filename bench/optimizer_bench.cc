// The parameter server's optimizer apply on slots full of subnormal floats,
// against the same apply on normal values, with flush-to-zero off and on
// (common/float_mode.h): the cliff that made the default job's server spend
// 36% of its CPU in Adam, and what the servers run with now.
//
// For each optimizer: one apply over `--elements` floats with zero
// gradients (a border pixel's: the case that keeps a slot decaying into the
// subnormal range), slots refilled before every timed apply, median of
// `--repeats`. The memory-bound triad of the same arrays is the baseline.
//
//   bazel run --config=opt //bench:optimizer_bench
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <memory>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/types/span.h"
#include "bench/baselines.h"
#include "common/float_mode.h"
#include "common/job/update_rule.h"
#include "ps/optimizer.h"

ABSL_FLAG(int64_t, elements, 1 << 20, "floats per apply");
ABSL_FLAG(int, repeats, 15, "timed applies per case (the median is shown)");

namespace psflow {
namespace {

struct Case {
  const char* name;
  OptimizerParams::Kind kind;
};

// Median nanoseconds per element of one apply, slots set to `slot_value`
// before each.
double TimeApply(const Optimizer& optimizer, int64_t n, float slot_value,
                 int repeats) {
  std::vector<float> param(n, 0.01f), grad(n, 0.0f);
  const size_t num_slots = optimizer.slot_names().size();
  std::vector<std::vector<float>> slots(num_slots, std::vector<float>(n));
  std::vector<absl::Span<float>> spans;
  for (auto& s : slots) spans.push_back(absl::MakeSpan(s));
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    for (auto& s : slots) std::fill(s.begin(), s.end(), slot_value);
    const auto start = std::chrono::steady_clock::now();
    optimizer.Apply(1e-3, 100 + r, absl::MakeSpan(param), grad, spans);
    const auto end = std::chrono::steady_clock::now();
    times.push_back(
        std::chrono::duration<double, std::nano>(end - start).count() /
        static_cast<double>(n));
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2,
                   times.end());
  return times[times.size() / 2];
}

int Main() {
  const int64_t n = absl::GetFlag(FLAGS_elements);
  const int repeats = absl::GetFlag(FLAGS_repeats);
  // Subnormal: below FLT_MIN (1.2e-38), as Adam's m of an input that is
  // almost always 0 becomes; normal: a typical slot value.
  const float subnormal = std::numeric_limits<float>::min() / 64;
  const float normal = 1e-3f;
  const double triad_gbps = bench::TriadGBps(static_cast<size_t>(n), 5);
  std::printf(
      "optimizer apply, %lld floats, zero gradients, median of %d; "
      "baseline triad %.1f GB/s (%.3f ns per float of 12 bytes)\n",
      static_cast<long long>(n), repeats, triad_gbps, 12 / triad_gbps);
  std::printf("%-9s %12s %12s %12s %12s %9s %9s\n", "optimizer", "normal",
              "subnormal", "normal", "subnormal", "cliff", "ftz ratio");
  std::printf("%-9s %12s %12s %12s %12s %9s %9s\n", "", "ns/elem", "ns/elem",
              "ns/elem", "ns/elem", "no ftz", "");
  std::printf("%-9s %25s %25s\n", "", "-- flush-to-zero off --",
              "-- flush-to-zero on --");
  const Case cases[] = {{"sgd", OptimizerParams::Kind::kSgd},
                        {"momentum", OptimizerParams::Kind::kMomentum},
                        {"adagrad", OptimizerParams::Kind::kAdagrad},
                        {"adam", OptimizerParams::Kind::kAdam},
                        {"adamw", OptimizerParams::Kind::kAdamW},
                        {"ftrl", OptimizerParams::Kind::kFtrl}};
  for (const Case& c : cases) {
    OptimizerParams params;
    params.kind = c.kind;
    if (c.kind == OptimizerParams::Kind::kAdamW) params.weight_decay = 0.01;
    absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
        Optimizer::Create(params);
    if (!optimizer.ok()) {
      std::fprintf(stderr, "%s: %s\n", c.name,
                   std::string(optimizer.status().message()).c_str());
      return 1;
    }
    DisableFlushToZero();
    const double off_normal = TimeApply(**optimizer, n, normal, repeats);
    const double off_subnormal = TimeApply(**optimizer, n, subnormal, repeats);
    EnableFlushToZero();
    const double on_normal = TimeApply(**optimizer, n, normal, repeats);
    const double on_subnormal = TimeApply(**optimizer, n, subnormal, repeats);
    // Speed on subnormals as a fraction of the speed on normal values.
    std::printf("%-9s %12.3f %12.3f %12.3f %12.3f %8.2fx %9.2f\n", c.name,
                off_normal, off_subnormal, on_normal, on_subnormal,
                off_subnormal / off_normal, on_normal / on_subnormal);
  }
  std::printf(
      "cliff: time on subnormal slots over time on normal ones, flush-to-zero "
      "off; ftz ratio: speed on subnormal slots as a fraction of the speed on "
      "normal ones with flush-to-zero on (the servers' mode; target >= "
      "0.8)\n");
  return 0;
}

}  // namespace
}  // namespace psflow

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return psflow::Main();
}
