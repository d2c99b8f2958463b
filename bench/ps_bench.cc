// ps_bench: parameter-server transport and optimizer throughput, beside the
// physical limits measured in the same run.
//
//   bazel run --config=opt //bench:ps_bench            # full table
//   bazel run --config=opt //bench:ps_bench -- --sizes_mb=4,40 --repeats=3
//
// Starts real ps_server processes on 127.0.0.1, pushes and pulls one
// variable of each size (split over the servers), and prints a Markdown
// report for bench/RESULTS.md. Every number is GB/s = 1e9 bytes/s of
// tensor payload (push+pull counts both directions).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/baselines.h"
#include "bench/bench_cluster.h"
#include "bench/run_dir.h"
#include "client/ps_client.h"
#include "common/process_setup.h"
#include "proto/protocol.h"
#include "ps/optimizer.h"

ABSL_FLAG(std::string, sizes_mb, "4,40,400", "Variable sizes in MB (1e6)");
ABSL_FLAG(int, repeats, 5, "Timed repetitions per measurement (median)");
ABSL_FLAG(int64_t, chunk_bytes, 4 << 20, "ps_server --chunk_bytes");
ABSL_FLAG(int, connections, 2, "TCP connections per client per server");
ABSL_FLAG(int64_t, shared_memory_mb, 0,
          "Shared memory each client offers each server (MiB); 0 keeps all "
          "tensor bytes on TCP, which the loopback baseline measures");
ABSL_FLAG(std::string, ps_server, "",
          "Path of ps_server; default: from this binary's runfiles");
ABSL_FLAG(std::string, ops, "push,pull,both",
          "Transfers to measure (for profiling one at a time)");
ABSL_FLAG(int64_t, tls_mb, 40,
          "Variable size for the TLS vs plaintext comparison (0: skip it)");
ABSL_FLAG(int, tls_rounds, 3,
          "Alternating plaintext/TLS rounds in that comparison");
ABSL_FLAG(int64_t, optimizer_elements, 16 << 20,
          "Elements per optimizer apply measurement (64 MiB of floats; 0: "
          "skip it)");
ABSL_FLAG(std::string, layouts, "1x1,2x2",
          "workers x ps layouts of the transfer table");
ABSL_FLAG(std::string, optimizer, "sgd",
          "The optimizer pushes apply on the server: sgd or adam");
ABSL_FLAG(int, cpu_pushes, 50,
          "Pushes of the first size (1 worker x 1 ps) timed for the "
          "server's CPU time per pushed float (0: skip)");
ABSL_FLAG(bool, cpu_then_pull, false,
          "Each timed push of --cpu_pushes carries a pull of the same "
          "variable (PushThenPull, as the default job's workers send it)");
ABSL_FLAG(std::string, server_flags, "",
          "More ps_server flags, comma-separated (e.g. --apply_threads=1)");

namespace psflow::bench {
namespace {

// Async, --optimizer at a learning rate that leaves the values as they are.
ConfigureRequest BenchConfig() {
  ConfigureRequest config;
  config.set_protocol_version(kProtocolVersion);
  config.mutable_optimizer()->set_kind(absl::GetFlag(FLAGS_optimizer) == "adam"
                                           ? OptimizerConfig::ADAM
                                           : OptimizerConfig::SGD);
  config.mutable_learning_rate()->set_learning_rate(1e-9);
  config.set_mode(ASYNC);
  return config;
}

struct TransferResult {
  double push = 0, pull = 0, push_pull = 0;
};

absl::StatusOr<TransferResult> MeasureTransfers(const Cluster& cluster,
                                                int workers, int num_ps,
                                                int64_t bytes, int repeats) {
  const int64_t n = bytes / static_cast<int64_t>(sizeof(float));
  absl::StatusOr<Placement> placement =
      PlaceVariables({{"v", {n}}}, num_ps, /*split_threshold_bytes=*/1);
  if (!placement.ok()) return placement.status();
  const ConfigureRequest config = BenchConfig();
  std::vector<std::unique_ptr<ParameterClient>> clients;
  std::vector<std::vector<float>> grads, values;
  for (int w = 0; w < workers; ++w) {
    clients.push_back(cluster.NewClient(*placement));
    absl::Status s = clients.back()->Configure(config);
    if (!s.ok()) return s;
    grads.emplace_back(n, 1e-3f);  // touched now, not while timing
    values.emplace_back(n, 0.0f);
  }
  absl::Status created = clients[0]->CreateVariables();
  if (!created.ok()) return created;

  enum Kind { kPush, kPull, kBoth };
  auto run = [&](Kind kind) -> absl::StatusOr<double> {
    std::vector<std::shared_ptr<PsHandle>> handles;
    const absl::Time start = absl::Now();
    for (int w = 0; w < workers; ++w) {
      if (kind != kPull) handles.push_back(clients[w]->Push({{"v", grads[w]}}));
      if (kind != kPush) {
        handles.push_back(clients[w]->Pull({{"v", absl::MakeSpan(values[w])}}));
      }
    }
    for (auto& h : handles) {
      absl::Status s = h->Wait();
      if (!s.ok()) return s;
    }
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    return static_cast<double>(bytes) * handles.size() / seconds / 1e9;
  };
  TransferResult result;
  const std::string ops = absl::GetFlag(FLAGS_ops);
  for (Kind kind : {kPush, kPull, kBoth}) {
    const char* name = kind == kPush ? "push" : kind == kPull ? "pull" : "both";
    if (!absl::StrContains(ops, name)) continue;
    absl::StatusOr<double> warm = run(kind);
    if (!warm.ok()) return warm.status();
    std::vector<double> samples;
    for (int r = 0; r < repeats; ++r) {
      absl::StatusOr<double> gbps = run(kind);
      if (!gbps.ok()) return gbps.status();
      samples.push_back(*gbps);
    }
    (kind == kPush   ? result.push
     : kind == kPull ? result.pull
                     : result.push_pull) = Median(samples);
  }
  return result;
}

struct ServerCpuResult {
  double push_gbps = 0;     // over all the timed pushes
  double server_cpu_s = 0;  // the server's CPU time over them
  double client_cpu_s = 0;  // this process's
  double wall_s = 0;
};

// `pushes` pushes of one variable of `bytes`, one after the other, from one
// worker to one server, each carrying a pull of the variable when
// `then_pull`: the server's CPU time per pushed float.
absl::StatusOr<ServerCpuResult> MeasureServerCpu(const Cluster& cluster,
                                                 int64_t bytes, int pushes,
                                                 bool then_pull) {
  const int64_t n = bytes / static_cast<int64_t>(sizeof(float));
  absl::StatusOr<Placement> placement =
      PlaceVariables({{"v", {n}}}, 1, /*split_threshold_bytes=*/1);
  if (!placement.ok()) return placement.status();
  const ConfigureRequest config = BenchConfig();
  std::unique_ptr<ParameterClient> client = cluster.NewClient(*placement);
  if (absl::Status s = client->Configure(config); !s.ok()) return s;
  if (absl::Status s = client->CreateVariables(); !s.ok()) return s;
  std::vector<float> grad(n, 1e-3f);
  std::vector<float> values(n);
  auto push = [&] {
    return then_pull ? client->PushThenPull({{"v", grad}},
                                            {{"v", absl::MakeSpan(values)}})
                     : client->Push({{"v", grad}});
  };
  for (int warm = 0; warm < 2; ++warm) {
    if (absl::Status s = push()->Wait(); !s.ok()) return s;
  }
  ServerCpuResult result;
  absl::StatusOr<double> server_start = cluster.ServersCpuSeconds();
  if (!server_start.ok()) return server_start.status();
  const double client_start = ProcessCpuSeconds();
  const absl::Time start = absl::Now();
  for (int i = 0; i < pushes; ++i) {
    if (absl::Status s = push()->Wait(); !s.ok()) return s;
  }
  result.wall_s = absl::ToDoubleSeconds(absl::Now() - start);
  result.client_cpu_s = ProcessCpuSeconds() - client_start;
  absl::StatusOr<double> server_end = cluster.ServersCpuSeconds();
  if (!server_end.ok()) return server_end.status();
  result.server_cpu_s = *server_end - *server_start;
  result.push_gbps = static_cast<double>(bytes) * pushes / result.wall_s / 1e9;
  return result;
}

struct OptimizerResult {
  std::string name;
  double gbps;  // memory traffic of the update
  double melems_per_s;
};

std::vector<OptimizerResult> MeasureOptimizers(int64_t n, int repeats) {
  using Kind = OptimizerParams::Kind;
  std::vector<OptimizerResult> results;
  for (Kind kind : {Kind::kSgd, Kind::kMomentum, Kind::kAdagrad, Kind::kAdam,
                    Kind::kAdamW}) {
    OptimizerParams params;
    params.kind = kind;
    if (kind == Kind::kAdamW) params.weight_decay = 0.01;
    std::unique_ptr<Optimizer> optimizer = *Optimizer::Create(params);
    std::vector<float> param(n, 0.5f), grad(n, 1e-3f);
    std::vector<std::vector<float>> slots(optimizer->slot_names().size(),
                                          std::vector<float>(n, 0.1f));
    std::vector<absl::Span<float>> spans;
    for (auto& s : slots) spans.push_back(absl::MakeSpan(s));
    double best = 1e9;
    for (int r = 0; r <= repeats; ++r) {
      const absl::Time start = absl::Now();
      optimizer->Apply(0.01, r + 1, absl::MakeSpan(param), grad, spans);
      if (r > 0) {
        best = std::min(best, absl::ToDoubleSeconds(absl::Now() - start));
      }
    }
    // param read+write, grad read, each slot read+write.
    const double bytes = 4.0 * n * (3 + 2 * slots.size());
    results.push_back(
        {OptimizerKindName(kind), bytes / best / 1e9, n / best / 1e6});
  }
  return results;
}

int Measure(const std::string& dir, const std::string& binary,
            const Cluster::Options& cluster_options,
            const std::vector<std::pair<int, int>>& layouts,
            const std::vector<int64_t>& sizes, int repeats);

int Main(int argc, char** argv) {
  SetUpProcessForBulkTransfers();
  absl::ParseCommandLine(argc, argv);
  const int repeats = std::max(1, absl::GetFlag(FLAGS_repeats));
  std::vector<int64_t> sizes;
  for (absl::string_view s :
       absl::StrSplit(absl::GetFlag(FLAGS_sizes_mb), ',')) {
    int64_t mb = 0;
    if (!absl::SimpleAtoi(s, &mb) || mb <= 0) {
      std::fprintf(stderr, "--sizes_mb: \"%s\" is not a positive number\n",
                   std::string(s).c_str());
      return 2;
    }
    sizes.push_back(mb * 1000000);
  }
  const std::string binary =
      PsServerPath(absl::GetFlag(FLAGS_ps_server), argv[0]);

  Cluster::Options cluster_options;
  for (absl::string_view flag : absl::StrSplit(
           absl::GetFlag(FLAGS_server_flags), ',', absl::SkipEmpty())) {
    cluster_options.server_flags.emplace_back(flag);
  }
  std::vector<std::pair<int, int>> layouts;
  for (absl::string_view layout :
       absl::StrSplit(absl::GetFlag(FLAGS_layouts), ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> parts = absl::StrSplit(layout, 'x');
    int workers = 0, num_ps = 0;
    if (!absl::SimpleAtoi(parts.first, &workers) ||
        !absl::SimpleAtoi(parts.second, &num_ps) || workers < 1 || num_ps < 1) {
      std::fprintf(stderr, "--layouts: \"%s\" is not WORKERSxPS (e.g. 1x1)\n",
                   std::string(layout).c_str());
      return 2;
    }
    layouts.emplace_back(workers, num_ps);
  }
  cluster_options.chunk_bytes = absl::GetFlag(FLAGS_chunk_bytes);
  cluster_options.connections = absl::GetFlag(FLAGS_connections);
  cluster_options.shared_memory_bytes = absl::GetFlag(FLAGS_shared_memory_mb)
                                        << 20;
  absl::StatusOr<std::string> dir = MakeRunDir("ps_bench");
  if (!dir.ok()) {
    std::fprintf(stderr, "%s\n", dir.status().ToString().c_str());
    return 1;
  }
  return FinishRunDir(
      *dir, Measure(*dir, binary, cluster_options, layouts, sizes, repeats));
}

// Runs and prints every measurement the flags ask for, its servers' logs
// in `dir`; the exit code.
int Measure(const std::string& dir, const std::string& binary,
            const Cluster::Options& cluster_options,
            const std::vector<std::pair<int, int>>& layouts,
            const std::vector<int64_t>& sizes, int repeats) {
  std::printf("## ps_bench\n\n");
  std::printf("- machine: %s, %ld cores\n", CpuModel().c_str(),
              sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("- load average (1, 5, 15 min) at start: %s\n",
              LoadAverages().c_str());
  std::printf("- ps_server %s, pushes apply %s%s%s\n", binary.c_str(),
              absl::GetFlag(FLAGS_optimizer).c_str(),
              cluster_options.server_flags.empty() ? "" : ", server flags ",
              absl::StrJoin(cluster_options.server_flags, " ").c_str());
  std::printf(
      "- chunk %lld bytes, %d connection(s) per client per server, "
      "shared memory %s, median of %d\n\n",
      static_cast<long long>(absl::GetFlag(FLAGS_chunk_bytes)),
      absl::GetFlag(FLAGS_connections),
      absl::GetFlag(FLAGS_shared_memory_mb) > 0
          ? absl::StrCat(absl::GetFlag(FLAGS_shared_memory_mb), " MiB").c_str()
          : "off (TCP only)",
      repeats);

  // This VM's speed drifts with its host's load, so every ratio compares a
  // row with a baseline measured just before it, under the same conditions.
  const int64_t probe_bytes = 400000000;
  std::printf("### Transfers (real ps_server processes)\n\n");
  std::printf(
      "Each row's baseline is loopback TCP measured just before it: "
      "1 stream for 1 x 1, 2 streams (aggregate) for 2 x 2.\n\n");
  std::printf(
      "| workers x ps | MB | baseline GB/s | push GB/s | pull GB/s | "
      "push+pull GB/s | push / base | pull / base |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
  std::fflush(stdout);
  for (auto [workers, num_ps] : layouts) {
    for (int64_t bytes : sizes) {
      absl::StatusOr<double> base =
          LoopbackTcpGBps(probe_bytes / workers, workers, 3);
      if (!base.ok()) {
        std::fprintf(stderr, "loopback probe failed: %s\n",
                     base.status().ToString().c_str());
        return 1;
      }
      absl::StatusOr<std::unique_ptr<Cluster>> cluster =
          Cluster::Start(binary, num_ps, dir, cluster_options);
      if (!cluster.ok()) {
        std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str());
        return 1;
      }
      absl::StatusOr<TransferResult> r =
          MeasureTransfers(**cluster, workers, num_ps, bytes, repeats);
      if (!r.ok()) {
        std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
        return 1;
      }
      std::printf(
          "| %d x %d | %lld | %.2f | %.2f | %.2f | %.2f | %.2fx | %.2fx |\n",
          workers, num_ps, static_cast<long long>(bytes / 1000000), *base,
          r->push, r->pull, r->push_pull, r->push / *base, r->pull / *base);
      std::fflush(stdout);
    }
  }
  std::printf("\n");

  if (const int pushes = absl::GetFlag(FLAGS_cpu_pushes);
      pushes > 0 && !sizes.empty()) {
    absl::StatusOr<std::unique_ptr<Cluster>> cluster =
        Cluster::Start(binary, 1, dir, cluster_options);
    if (!cluster.ok()) {
      std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str());
      return 1;
    }
    absl::StatusOr<ServerCpuResult> r = MeasureServerCpu(
        **cluster, sizes[0], pushes, absl::GetFlag(FLAGS_cpu_then_pull));
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
      return 1;
    }
    const double floats = static_cast<double>(sizes[0]) / sizeof(float) *
                          static_cast<double>(pushes);
    std::printf(
        "### The server's CPU time per pushed float (1 worker x 1 ps, %lld "
        "MB, %d pushes%s one after the other, %s)\n\n",
        static_cast<long long>(sizes[0] / 1000000), pushes,
        absl::GetFlag(FLAGS_cpu_then_pull) ? " with then_pull" : "",
        absl::GetFlag(FLAGS_optimizer).c_str());
    std::printf(
        "| push GB/s | server CPU s | server CPU ns/float | server cores "
        "busy | client CPU ns/float |\n");
    std::printf("|---:|---:|---:|---:|---:|\n");
    std::printf("| %.2f | %.2f | %.2f | %.2f | %.2f |\n\n", r->push_gbps,
                r->server_cpu_s, r->server_cpu_s * 1e9 / floats,
                r->server_cpu_s / r->wall_s, r->client_cpu_s * 1e9 / floats);
    std::printf(
        "Server CPU from /proc/<pid>/stat (10 ms ticks) over the whole "
        "server process: receiving, checking and applying.\n\n");
    // The floor: what one loopback stream of the same bytes costs both
    // ends together, as the TCP targets compare against it.
    absl::StatusOr<LoopbackCost> loopback =
        LoopbackTcpRun(sizes[0] * static_cast<size_t>(std::min(pushes, 20)), 1);
    if (loopback.ok()) {
      const double loop_floats =
          static_cast<double>(sizes[0]) / sizeof(float) * std::min(pushes, 20);
      std::printf(
          "Loopback stream of the same bytes (one connection, this "
          "process's CPU: sender and receiver, kernel copies included): %.2f "
          "GB/s, %.2f CPU ns/float, %.2f cores busy. psflow's push costs "
          "server + client %.2f CPU ns/float.\n\n",
          loopback->gbps, loopback->cpu_seconds * 1e9 / loop_floats,
          loopback->cpu_seconds / loopback->wall_seconds,
          (r->server_cpu_s + r->client_cpu_s) * 1e9 / floats);
    }
    std::fflush(stdout);
  }

  if (const int64_t tls_bytes = absl::GetFlag(FLAGS_tls_mb) * 1000000;
      tls_bytes > 0) {
    // Same run, same clusters' shape, rounds alternating so drift hits
    // both alike; TCP only (shared memory would bypass TLS for tensors).
    std::printf(
        "### Mutual TLS vs plaintext (1 worker x 1 ps, %lld MB, TCP)\n\n",
        static_cast<long long>(tls_bytes / 1000000));
    std::printf(
        "| round | transport | push GB/s | pull GB/s | push+pull GB/s |\n");
    std::printf("|---|---|---:|---:|---:|\n");
    std::vector<double> ratios_push, ratios_pull;
    for (int round = 1; round <= absl::GetFlag(FLAGS_tls_rounds); ++round) {
      double push[2] = {0, 0}, pull[2] = {0, 0};
      for (int tls = 0; tls < 2; ++tls) {
        Cluster::Options options = cluster_options;
        options.shared_memory_bytes = 0;
        options.tls = tls == 1;
        absl::StatusOr<std::unique_ptr<Cluster>> cluster =
            Cluster::Start(binary, 1, dir, options);
        if (!cluster.ok()) {
          std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str());
          return 1;
        }
        absl::StatusOr<TransferResult> r =
            MeasureTransfers(**cluster, 1, 1, tls_bytes, repeats);
        if (!r.ok()) {
          std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
          return 1;
        }
        push[tls] = r->push;
        pull[tls] = r->pull;
        std::printf("| %d | %s | %.2f | %.2f | %.2f |\n", round,
                    tls ? "mutual TLS" : "plaintext", r->push, r->pull,
                    r->push_pull);
        std::fflush(stdout);
      }
      ratios_push.push_back(push[1] / push[0]);
      ratios_pull.push_back(pull[1] / pull[0]);
    }
    std::printf(
        "\nTLS / plaintext, median of the rounds: push %.2fx, pull "
        "%.2fx\n\n",
        Median(ratios_push), Median(ratios_pull));
  }

  if (absl::GetFlag(FLAGS_optimizer_elements) > 0) {
    const double triad = TriadGBps(absl::GetFlag(FLAGS_optimizer_elements), 5);
    std::printf("Memory triad (1 thread, just before the table): %.2f GB/s\n\n",
                triad);
    std::printf(
        "### Optimizer apply (one thread, %lld elements)\n\n",
        static_cast<long long>(absl::GetFlag(FLAGS_optimizer_elements)));
    std::printf("| optimizer | GB/s moved | M elements/s | / triad |\n");
    std::printf("|---|---:|---:|---:|\n");
    for (const OptimizerResult& r :
         MeasureOptimizers(absl::GetFlag(FLAGS_optimizer_elements), repeats)) {
      std::printf("| %s | %.2f | %.0f | %.2fx |\n", r.name.c_str(), r.gbps,
                  r.melems_per_s, r.gbps / triad);
    }
  }
  std::printf("\nLoad average (1, 5, 15 min) at end: %s\n",
              LoadAverages().c_str());
  return 0;
}

}  // namespace
}  // namespace psflow::bench

int main(int argc, char** argv) { return psflow::bench::Main(argc, argv); }
