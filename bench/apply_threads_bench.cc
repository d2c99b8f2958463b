#include "bench/apply_threads_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "bench/baselines.h"
#include "common/float_mode.h"
#include "common/job/update_rule.h"
#include "proto/protocol.h"
#include "ps/apply_pool.h"
#include "ps/optimizer.h"
#include "ps/ps_core.h"

namespace psflow::bench {
namespace {

constexpr double kMinSeconds = 0.05;

struct Cost {
  double wall_ns = 0;  // median of the applies, per float
  double cpu_ns = 0;   // the process's, over all the applies, per float
};

// Runs `once` (an apply of `floats` floats) twice to warm up, then at least
// `repeats` times and for at least kMinSeconds.
Cost Measure(int64_t floats, int repeats, absl::FunctionRef<void()> once) {
  once();
  once();
  std::vector<double> walls;
  double total = 0;
  const double cpu_start = ProcessCpuSeconds();
  while (static_cast<int>(walls.size()) < repeats || total < kMinSeconds) {
    const auto start = std::chrono::steady_clock::now();
    once();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    walls.push_back(seconds);
    total += seconds;
  }
  const double cpu = ProcessCpuSeconds() - cpu_start;
  std::nth_element(walls.begin(), walls.begin() + walls.size() / 2,
                   walls.end());
  const double n = static_cast<double>(floats);
  return {walls[walls.size() / 2] * 1e9 / n,
          cpu * 1e9 / (n * static_cast<double>(walls.size()))};
}

void PrintBaseline() {
  const double triad = TriadGBps(size_t{1} << 20, 5);
  std::printf(
      "Baseline, same run: one-thread triad %.1f GB/s (%.3f ns per float of "
      "12 bytes); load average %s\n\n",
      triad, 12 / triad, LoadAverages().c_str());
}

absl::StatusOr<std::unique_ptr<ParameterServerCore>> AdamCore(
    int apply_threads,
    const std::vector<std::pair<std::string, int64_t>>& vars) {
  ParameterServerCore::Options options;
  options.chunk_bytes = 4 << 20;
  options.apply_threads = apply_threads;
  auto core = std::make_unique<ParameterServerCore>(options);
  ConfigureRequest config;
  config.set_protocol_version(kProtocolVersion);
  config.mutable_optimizer()->set_kind(OptimizerConfig::ADAM);
  config.mutable_learning_rate()->set_learning_rate(1e-3);
  config.set_mode(ASYNC);
  if (absl::StatusOr<ConfigureResponse> r = core->Configure(config); !r.ok()) {
    return r.status();
  }
  CreateVariablesRequest create;
  create.set_protocol_version(kProtocolVersion);
  for (const auto& [name, n] : vars) {
    VariableSpec* spec = create.add_variables();
    spec->set_name(name);
    spec->add_shape(n);
  }
  if (absl::Status s = core->CreateVariables(create); !s.ok()) return s;
  return core;
}

}  // namespace

void PrintApplyThreads(int threads, const std::vector<int64_t>& sizes,
                       int repeats) {
  // The servers' float mode.
  EnableFlushToZero();
  std::printf(
      "### Optimizer apply split over %d threads (ps/apply_pool.h, ranges "
      "as the server splits them, no inline threshold) against one "
      "thread\n\n",
      threads);
  PrintBaseline();
  std::printf(
      "| optimizer | floats | 1 thread: wall ns/float | CPU ns/float | %d "
      "threads: wall ns/float | CPU ns/float | wall speedup | CPU ratio |\n",
      threads);
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
  using Kind = OptimizerParams::Kind;
  struct Case {
    const char* name;
    Kind kind;
    double power;  // ftrl's learning_rate_power
    bool moving_average;
  };
  const Case cases[] = {
      {"sgd", Kind::kSgd, -0.5, false},
      {"momentum", Kind::kMomentum, -0.5, false},
      {"adagrad", Kind::kAdagrad, -0.5, false},
      {"adam", Kind::kAdam, -0.5, false},
      {"ftrl", Kind::kFtrl, -0.5, false},
      {"ftrl (power -0.7)", Kind::kFtrl, -0.7, false},
      {"moving average", Kind::kSgd, -0.5, true},
  };
  // One thread's time per float at the largest size, for relative_cost.
  std::vector<std::pair<const Case*, double>> largest;
  std::vector<double> declared;
  for (const Case& c : cases) {
    OptimizerParams params;
    params.kind = c.kind;
    params.learning_rate_power = c.power;
    std::unique_ptr<Optimizer> optimizer = c.moving_average
                                               ? MovingAverageUpdate(0.9f)
                                               : *Optimizer::Create(params);
    declared.push_back(optimizer->relative_cost());
    Cost at_largest;
    for (int64_t n : sizes) {
      std::vector<float> param(n, 0.5f), grad(n);
      for (int64_t i = 0; i < n; ++i) grad[i] = (i % 2 ? 1e-3f : -2e-3f);
      std::vector<std::vector<float>> slots;
      for (size_t s = 0; s < optimizer->slot_names().size(); ++s) {
        slots.emplace_back(n, optimizer->slot_initial_value(s));
      }
      int64_t step = 0;
      auto apply = [&](ApplyPool& pool) {
        ++step;
        pool.ForEachRange(
            n, optimizer->relative_cost(), [&](int64_t begin, int64_t end) {
              std::vector<absl::Span<float>> spans;
              for (auto& slot : slots) {
                spans.push_back(
                    absl::MakeSpan(slot).subspan(begin, end - begin));
              }
              optimizer->Apply(
                  1e-3, step, absl::MakeSpan(param).subspan(begin, end - begin),
                  absl::MakeConstSpan(grad).subspan(begin, end - begin), spans);
            });
      };
      ApplyPool::Options inline_only;
      inline_only.threads = 1;
      ApplyPool::Options always_split;
      always_split.threads = threads;
      always_split.min_parallel_work = 0;
      ApplyPool one_thread(inline_only);
      ApplyPool split(always_split);
      const Cost a = Measure(n, repeats, [&] { apply(one_thread); });
      const Cost b = Measure(n, repeats, [&] { apply(split); });
      at_largest = a;
      std::printf("| %s | %lld | %.3f | %.3f | %.3f | %.3f | %.2fx | %.2f |\n",
                  c.name, static_cast<long long>(n), a.wall_ns, a.cpu_ns,
                  b.wall_ns, b.cpu_ns, a.wall_ns / b.wall_ns,
                  b.cpu_ns / a.cpu_ns);
      std::fflush(stdout);
    }
    largest.emplace_back(&c, at_largest.wall_ns);
  }
  double adam = 1;
  for (const auto& [c, ns] : largest) {
    if (c->kind == Kind::kAdam) adam = ns;
  }
  std::printf(
      "\nwall: median time of one apply per float; CPU: the process's CPU "
      "time (all threads) per applied float; CPU ratio: split over one "
      "thread (the pool's overhead). The server applies inline below "
      "%lld floats of Adam's cost (ApplyPool::kDefaultMinParallelWork; "
      "an optimizer's floats count relative_cost times).\n\n"
      "Time per float relative to Adam's, one thread, %lld floats "
      "(measured / Optimizer::relative_cost):",
      static_cast<long long>(ApplyPool::kDefaultMinParallelWork),
      static_cast<long long>(sizes.empty() ? 0 : sizes.back()));
  for (size_t i = 0; i < largest.size(); ++i) {
    std::printf("%s %s %.2f / %.2f", i == 0 ? "" : ",", largest[i].first->name,
                largest[i].second / adam, declared[i]);
  }
  std::printf("\n\n");
}

absl::Status PrintServerApply(int threads, int repeats) {
  std::printf(
      "### The server's push path: Adam through ParameterServerCore, apply "
      "threads 1 and %d\n\n",
      threads);
  PrintBaseline();
  std::printf(
      "| push | apply threads | wall ns/float | CPU ns/float | wall speedup "
      "| CPU ratio |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  struct Case {
    const char* name;
    int parts;
    int64_t floats_per_part;
  };
  for (const Case& c : {Case{"one 4 MiB chunk", 1, int64_t{1} << 20},
                        Case{"batch of 64 x 16384 floats", 64, 16384}}) {
    std::vector<std::pair<std::string, int64_t>> vars;
    for (int i = 0; i < c.parts; ++i) {
      vars.emplace_back(absl::StrCat("v", 100 + i), c.floats_per_part);
    }
    const int64_t floats = c.parts * c.floats_per_part;
    std::vector<float> grad(c.floats_per_part);
    for (int64_t i = 0; i < c.floats_per_part; ++i) {
      grad[i] = (i % 2 ? 1e-3f : -2e-3f);
    }
    Cost first;
    for (int t : {1, threads}) {
      absl::StatusOr<std::unique_ptr<ParameterServerCore>> core =
          AdamCore(t, vars);
      if (!core.ok()) return core.status();
      std::vector<ChunkRef> refs;
      for (const auto& [name, n] : vars) {
        absl::StatusOr<ChunkRef> ref =
            (*core)->Resolve(kProtocolVersion, name, 0, n);
        if (!ref.ok()) return ref.status();
        refs.push_back(*ref);
      }
      const std::vector<absl::Span<const float>> grads(refs.size(), grad);
      int64_t version = 0;
      absl::Status failed;
      const Cost cost = Measure(floats, repeats, [&] {
        absl::StatusOr<PushBatchResponse> r =
            (*core)->PushBatch(refs, version++, 0, grads);
        if (!r.ok()) failed = r.status();
      });
      if (!failed.ok()) return failed;
      if (t == 1) first = cost;
      std::printf("| %s | %d | %.3f | %.3f | %.2fx | %.2f |\n", c.name, t,
                  cost.wall_ns, cost.cpu_ns, first.wall_ns / cost.wall_ns,
                  cost.cpu_ns / first.cpu_ns);
      std::fflush(stdout);
      if (threads == 1) break;
    }
  }
  std::printf(
      "\nEach push is a PushBatch as the server's transports call it: every "
      "part checked for NaN/Inf, then applied under its chunk's lock. 1 "
      "apply thread is the server as it was before its apply threads (and "
      "the in-process default).\n\n");
  return absl::OkStatus();
}

}  // namespace psflow::bench
