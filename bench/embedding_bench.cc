// embedding_bench: sparse embedding-table throughput and scale, beside the
// physical limits measured in the same run.
//
//   bazel run --config=opt //bench:embedding_bench             # throughput
//   bazel run --config=opt //bench:embedding_bench -- --scale_rows=50000000
//
// Throughput: real ps_server processes on 127.0.0.1 (1, then 2), one table
// of dimension --dim with Adagrad; each step pulls (training pull: rows
// are created on first use) and pushes the rows of a batch of --batch
// examples x --fields ids drawn from a power law over --vocabulary ids per
// field, as a CTR worker does (the client deduplicates the batch's ids).
// Reported: distinct rows per step, rows/s and GB/s of row payload (ids
// and float rows, both directions for pull+push), next to the loopback TCP
// and memory-bandwidth baselines.
//
// Scale (--scale_rows > 0): fills one table with that many rows over
// --scale_servers servers in batches of 1 Mi ids, reports the servers'
// table bytes and resident memory per row against the raw 4 * dim * 2
// (values + Adagrad accumulator), then saves a checkpoint and restores it,
// timed.
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/baselines.h"
#include "bench/bench_cluster.h"
#include "checkpoint/checkpoint_manager.h"
#include "checkpoint/paths.h"
#include "client/ps_client.h"
#include "common/file_util.h"
#include "common/process_setup.h"
#include "common/splitmix64.h"
#include "proto/protocol.h"

ABSL_FLAG(int, batch, 4096, "Examples per step");
ABSL_FLAG(int, fields, 26, "Ids per example (one per categorical field)");
ABSL_FLAG(int, dim, 16, "Embedding dimension");
ABSL_FLAG(double, zipf, 1.05, "Power-law exponent of id frequencies");
ABSL_FLAG(int64_t, vocabulary, 1000000, "Distinct ids per field");
ABSL_FLAG(int, steps, 40, "Timed steps per measurement");
ABSL_FLAG(int, repeats, 3, "Timed repetitions (median)");
ABSL_FLAG(std::string, servers, "1,2", "Numbers of parameter servers");
ABSL_FLAG(int64_t, scale_rows, 0, "Rows for the scale test (0: skip it)");
ABSL_FLAG(int, scale_servers, 2, "Servers for the scale test");
ABSL_FLAG(std::string, dir, "/tmp/psflow-embedding-bench",
          "Logs and the scale test's checkpoint");
ABSL_FLAG(std::string, ps_server, "",
          "Path of ps_server; default: from this binary's runfiles");

namespace psflow::bench {
namespace {

// Ids of one field drawn from a power law over ranks 1..V: the inverse CDF
// of the continuous density ~ r^-s, floored (s != 1).
class PowerLawIds {
 public:
  PowerLawIds(int64_t vocabulary, double s, uint64_t seed)
      : v_(static_cast<double>(vocabulary)), s_(s), state_(seed) {}
  int64_t Rank() {
    const double u = (SplitMix64(state_) >> 11) * 0x1.0p-53;
    const double a = 1.0 - s_;
    const double r = std::pow((std::pow(v_, a) - 1.0) * u + 1.0, 1.0 / a);
    return std::min<int64_t>(static_cast<int64_t>(v_), static_cast<int64_t>(r));
  }

 private:
  const double v_, s_;
  uint64_t state_;
};

ConfigureRequest AdagradConfig() {
  ConfigureRequest config;
  config.set_protocol_version(kProtocolVersion);
  config.mutable_optimizer()->set_kind(OptimizerConfig::ADAGRAD);
  config.mutable_learning_rate()->set_learning_rate(0.05);
  config.set_mode(ASYNC);
  config.set_num_workers(1);
  config.set_replicas_to_aggregate(1);
  return config;
}

EmbeddingTableSpec Table(int dim) {
  EmbeddingTableSpec spec;
  spec.set_name("emb");
  spec.set_dim(dim);
  return spec;
}

struct Throughput {
  double distinct_rows = 0;  // per step, after deduplication
  double pull_rows = 0, push_rows = 0, both_rows = 0;  // distinct rows/s
  double pull_gbps = 0, push_gbps = 0, both_gbps = 0;
};

absl::StatusOr<Throughput> MeasureThroughput(const Cluster& cluster) {
  const int batch = absl::GetFlag(FLAGS_batch);
  const int fields = absl::GetFlag(FLAGS_fields);
  const int dim = absl::GetFlag(FLAGS_dim);
  const int steps = absl::GetFlag(FLAGS_steps);
  std::unique_ptr<ParameterClient> client = cluster.NewClient(Placement());
  if (absl::Status s = client->Configure(AdagradConfig()); !s.ok()) return s;
  if (absl::Status s = client->CreateTables({Table(dim)}); !s.ok()) return s;
  // Pre-drawn batches (drawing is not what is measured).
  std::vector<PowerLawIds> draws;
  for (int f = 0; f < fields; ++f) {
    draws.emplace_back(absl::GetFlag(FLAGS_vocabulary),
                       absl::GetFlag(FLAGS_zipf), 1000 + f);
  }
  constexpr int kBatches = 16;
  std::vector<std::vector<int64_t>> batches(kBatches);
  double distinct = 0;
  for (auto& ids : batches) {
    for (int e = 0; e < batch; ++e) {
      for (int f = 0; f < fields; ++f) {
        ids.push_back((int64_t{f} << 48) | draws[f].Rank());
      }
    }
    std::vector<int64_t> sorted = ids;
    std::sort(sorted.begin(), sorted.end());
    distinct += std::unique(sorted.begin(), sorted.end()) - sorted.begin();
  }
  distinct /= kBatches;
  std::vector<float> rows(static_cast<size_t>(batch) * fields * dim);
  std::vector<float> gradients(rows.size(), 0.001f);
  auto pull = [&](int step) -> absl::Status {
    ParameterClient::TableRows t{
        "emb", dim, batches[step % kBatches], absl::MakeSpan(rows), {}};
    return client->PullRows({t}, /*train=*/true).status();
  };
  auto push = [&](int step) -> absl::Status {
    ParameterClient::TableRows t{
        "emb", dim, batches[step % kBatches], {}, gradients};
    return client->PushRows({t}, 0, 0);
  };
  // Warm-up: every batch's rows exist before timing.
  for (int s = 0; s < kBatches; ++s) {
    if (absl::Status st = pull(s); !st.ok()) return st;
  }
  const int repeats = std::max(1, absl::GetFlag(FLAGS_repeats));
  std::vector<double> pulls, pushes, boths;
  for (int r = 0; r < repeats; ++r) {
    absl::Time start = absl::Now();
    for (int s = 0; s < steps; ++s) {
      if (absl::Status st = pull(s); !st.ok()) return st;
    }
    pulls.push_back(steps / absl::ToDoubleSeconds(absl::Now() - start));
    start = absl::Now();
    for (int s = 0; s < steps; ++s) {
      if (absl::Status st = push(s); !st.ok()) return st;
    }
    pushes.push_back(steps / absl::ToDoubleSeconds(absl::Now() - start));
    start = absl::Now();
    for (int s = 0; s < steps; ++s) {
      if (absl::Status st = pull(s); !st.ok()) return st;
      if (absl::Status st = push(s); !st.ok()) return st;
    }
    boths.push_back(steps / absl::ToDoubleSeconds(absl::Now() - start));
  }
  Throughput t;
  t.distinct_rows = distinct;
  const double row_bytes = 8.0 + 4.0 * dim;  // id + row on the wire
  t.pull_rows = Median(pulls) * distinct;
  t.push_rows = Median(pushes) * distinct;
  t.both_rows = Median(boths) * distinct;
  t.pull_gbps = t.pull_rows * row_bytes / 1e9;
  t.push_gbps = t.push_rows * row_bytes / 1e9;
  t.both_gbps = t.both_rows * 2 * row_bytes / 1e9;
  return t;
}

absl::Status MeasureScale(const std::string& binary, const std::string& dir) {
  const int64_t rows = absl::GetFlag(FLAGS_scale_rows);
  const int servers = absl::GetFlag(FLAGS_scale_servers);
  const int dim = absl::GetFlag(FLAGS_dim);
  Cluster::Options options;
  // Each cluster's own log directory: a port file left by an earlier
  // cluster must never be read as this one's.
  const std::string logs = JoinPath(dir, "logs/scale");
  (void)MakeDirectories(logs);
  absl::StatusOr<std::unique_ptr<Cluster>> cluster =
      Cluster::Start(binary, servers, logs, options);
  if (!cluster.ok()) return cluster.status();
  Placement placement;
  placement.bytes_per_ps.assign(servers, 0);
  placement.tables.push_back({"emb", dim});
  std::unique_ptr<ParameterClient> client = (*cluster)->NewClient(placement);
  if (absl::Status s = client->Configure(AdagradConfig()); !s.ok()) return s;
  if (absl::Status s = client->CreateTables({Table(dim)}); !s.ok()) return s;
  auto resident = [&]() -> absl::StatusOr<std::pair<int64_t, int64_t>> {
    absl::StatusOr<std::vector<StatsResponse>> stats =
        client->Stats(absl::Seconds(30));
    if (!stats.ok()) return stats.status();
    int64_t table_bytes = 0, rss = 0;
    for (const StatsResponse& s : *stats) {
      table_bytes += s.tables(0).bytes();
      rss += s.resident_bytes();
    }
    return std::make_pair(table_bytes, rss);
  };
  absl::StatusOr<std::pair<int64_t, int64_t>> empty = resident();
  if (!empty.ok()) return empty.status();
  constexpr int64_t kFill = 1 << 20;
  std::vector<int64_t> ids(kFill);
  std::vector<float> gradients(kFill * dim, 0.01f);
  const absl::Time fill_start = absl::Now();
  for (int64_t begin = 0; begin < rows; begin += kFill) {
    const int64_t n = std::min(kFill, rows - begin);
    ids.resize(n);
    for (int64_t i = 0; i < n; ++i) ids[i] = begin + i;
    ParameterClient::TableRows t{
        "emb", dim, ids, {}, absl::MakeConstSpan(gradients.data(), n * dim)};
    if (absl::Status s = client->PushRows({t}, 0, 0); !s.ok()) return s;
  }
  const double fill_seconds = absl::ToDoubleSeconds(absl::Now() - fill_start);
  absl::StatusOr<std::pair<int64_t, int64_t>> full = resident();
  if (!full.ok()) return full.status();
  const double raw = 4.0 * dim * 2;
  const double table_per_row = static_cast<double>(full->first) / rows;
  const double rss_per_row =
      static_cast<double>(full->second - empty->second) / rows;

  CheckpointManagerOptions ckpt;
  ckpt.directory = JoinPath(dir, "scale-ckpt");
  ckpt.retention.max_to_keep = 0;
  ckpt.job_name = "embedding_bench";
  ckpt.optimizer = AdagradConfig().optimizer();
  ckpt.mode = ASYNC;
  (void)RemoveRecursively(ckpt.directory);
  absl::StatusOr<std::unique_ptr<CheckpointManager>> manager =
      CheckpointManager::Create(ckpt, client.get());
  if (!manager.ok()) return manager.status();
  const absl::Time save_start = absl::Now();
  absl::StatusOr<SavedCheckpoint> saved = (*manager)->Save();
  const double save_seconds = absl::ToDoubleSeconds(absl::Now() - save_start);
  if (!saved.ok()) return saved.status();
  const absl::Time restore_start = absl::Now();
  absl::StatusOr<int64_t> step = RestoreCheckpoint(saved->path, ckpt.optimizer,
                                                   *client, absl::Minutes(30));
  const double restore_seconds =
      absl::ToDoubleSeconds(absl::Now() - restore_start);
  if (!step.ok()) return step.status();
  absl::StatusOr<std::pair<int64_t, int64_t>> after = resident();
  if (!after.ok()) return after.status();
  std::printf(
      "\n### Scale: %lld rows x %d floats, Adagrad, %d servers\n\n"
      "| measure | value |\n|---|---:|\n"
      "| fill (1 Mi-id pushes creating rows) | %.1f s, %.2f M rows/s |\n"
      "| raw bytes per row (values + accumulator) | %.0f |\n"
      "| table bytes per row (servers' Stats: rows, slots, metadata, "
      "index) | %.1f (%.2fx raw) |\n"
      "| resident bytes per row (servers' RSS growth) | %.1f (%.2fx raw) |\n"
      "| checkpoint | %.2f GB |\n"
      "| save | %.1f s (%.2f GB/s) |\n"
      "| restore (both servers read every segment) | %.1f s (%.2f GB/s) |\n"
      "| rows after restore | %lld |\n",
      static_cast<long long>(rows), dim, servers, fill_seconds,
      rows / fill_seconds / 1e6, raw, table_per_row, table_per_row / raw,
      rss_per_row, rss_per_row / raw, saved->bytes / 1e9, save_seconds,
      saved->bytes / save_seconds / 1e9, restore_seconds,
      saved->bytes / restore_seconds / 1e9,
      static_cast<long long>(after->first / table_per_row + 0.5));
  (void)RemoveRecursively(ckpt.directory);
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  SetUpProcessForBulkTransfers();
  absl::ParseCommandLine(argc, argv);
  const std::string dir = AbsolutePath(absl::GetFlag(FLAGS_dir));
  (void)RemoveRecursively(JoinPath(dir, "logs"));
  (void)MakeDirectories(JoinPath(dir, "logs"));
  const std::string binary =
      PsServerPath(absl::GetFlag(FLAGS_ps_server), argv[0]);
  std::printf("## embedding_bench\n\n");
  std::printf("- machine: %s, %ld cores\n", CpuModel().c_str(),
              sysconf(_SC_NPROCESSORS_ONLN));
  if (absl::GetFlag(FLAGS_scale_rows) > 0) {
    if (absl::Status s = MeasureScale(binary, dir); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    return 0;
  }
  absl::StatusOr<double> loopback = LoopbackTcpGBps(256 << 20, 2, 3);
  if (!loopback.ok()) {
    std::fprintf(stderr, "%s\n", loopback.status().ToString().c_str());
    return 1;
  }
  const double triad = TriadGBps(32 << 20, 3);
  std::printf(
      "- batch %d examples x %d fields, dim %d, power law s=%.2f over %lld "
      "ids per field, Adagrad, async, 1 client, median of %d x %d steps\n",
      absl::GetFlag(FLAGS_batch), absl::GetFlag(FLAGS_fields),
      absl::GetFlag(FLAGS_dim), absl::GetFlag(FLAGS_zipf),
      static_cast<long long>(absl::GetFlag(FLAGS_vocabulary)),
      absl::GetFlag(FLAGS_repeats), absl::GetFlag(FLAGS_steps));
  std::printf(
      "- baselines: loopback TCP %.2f GB/s (2 streams), memory triad %.2f "
      "GB/s (1 thread)\n\n",
      *loopback, triad);
  std::printf(
      "| ps | distinct rows/step | pull M rows/s | pull GB/s | push (Adagrad) "
      "M "
      "rows/s | push GB/s | pull+push M rows/s | pull+push GB/s | vs loopback "
      "|\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (absl::string_view s :
       absl::StrSplit(absl::GetFlag(FLAGS_servers), ',')) {
    int servers = 0;
    if (!absl::SimpleAtoi(s, &servers) || servers < 1) {
      std::fprintf(stderr, "--servers: \"%s\" is not a positive number\n",
                   std::string(s).c_str());
      return 2;
    }
    const std::string logs =
        JoinPath(dir, absl::StrCat("logs/", servers, "ps"));
    (void)MakeDirectories(logs);
    absl::StatusOr<std::unique_ptr<Cluster>> cluster =
        Cluster::Start(binary, servers, logs, Cluster::Options());
    if (!cluster.ok()) {
      std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str());
      return 1;
    }
    absl::StatusOr<Throughput> t = MeasureThroughput(**cluster);
    if (!t.ok()) {
      std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
      return 1;
    }
    std::printf(
        "| %d | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f%% |\n",
        servers, t->distinct_rows, t->pull_rows / 1e6, t->pull_gbps,
        t->push_rows / 1e6, t->push_gbps, t->both_rows / 1e6, t->both_gbps,
        100 * t->both_gbps / *loopback);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace psflow::bench

int main(int argc, char** argv) { return psflow::bench::Main(argc, argv); }
