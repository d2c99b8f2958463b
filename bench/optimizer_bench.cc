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
// Then the apply spread over the server's apply threads (ps/apply_pool.h):
// wall and CPU time per float on one thread against `--threads` threads,
// at sizes around the pool's inline threshold ("threads"), and through the
// server's push path (ParameterServerCore: NaN/Inf check, chunk lock,
// apply) with its apply threads off and on ("server"): the server's CPU
// time per applied float.
//
//   bazel run --config=opt //bench:optimizer_bench
//   bazel run --config=opt //bench:optimizer_bench -- --sections=threads
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <memory>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/types/span.h"
#include "bench/apply_threads_bench.h"
#include "bench/baselines.h"
#include "common/float_mode.h"
#include "common/job/update_rule.h"
#include "ps/apply_pool.h"
#include "ps/optimizer.h"

ABSL_FLAG(int64_t, elements, 1 << 20, "floats per apply");
ABSL_FLAG(int, repeats, 15, "timed applies per case (the median is shown)");
ABSL_FLAG(std::string, sections, "subnormal,threads,server",
          "what to measure: subnormal (the flush-to-zero cliff), threads "
          "(the apply split over threads, by size), server (the server's "
          "push path with its apply threads off and on)");
ABSL_FLAG(int, threads, 0,
          "apply threads for the threads and server sections; 0: this "
          "host's cores (ps_server's default)");
ABSL_FLAG(std::string, thread_sizes,
          "8192,16384,32768,65536,131072,262144,1048576",
          "floats per apply in the threads section");

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

int SubnormalSection() {
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
      "0.8)\n\n");
  return 0;
}

int Main() {
  const std::string sections = absl::GetFlag(FLAGS_sections);
  std::printf("load average (1, 5, 15 min) at start: %s\n\n",
              bench::LoadAverages().c_str());
  if (absl::StrContains(sections, "subnormal")) {
    if (int rc = SubnormalSection(); rc != 0) return rc;
  }
  const int threads = absl::GetFlag(FLAGS_threads) > 0
                          ? absl::GetFlag(FLAGS_threads)
                          : ApplyPool::HostCores();
  if (absl::StrContains(sections, "threads")) {
    std::vector<int64_t> sizes;
    for (absl::string_view s :
         absl::StrSplit(absl::GetFlag(FLAGS_thread_sizes), ',')) {
      int64_t size = 0;
      if (!absl::SimpleAtoi(s, &size) || size <= 0) {
        std::fprintf(stderr, "--thread_sizes: \"%s\" is not a positive count\n",
                     std::string(s).c_str());
        return 2;
      }
      sizes.push_back(size);
    }
    bench::PrintApplyThreads(threads, sizes, absl::GetFlag(FLAGS_repeats));
  }
  if (absl::StrContains(sections, "server")) {
    if (absl::Status s =
            bench::PrintServerApply(threads, absl::GetFlag(FLAGS_repeats));
        !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  std::printf("load average (1, 5, 15 min) at end: %s\n",
              bench::LoadAverages().c_str());
  return 0;
}

}  // namespace
}  // namespace psflow

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return psflow::Main();
}
