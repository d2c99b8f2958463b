// ctr_rows_bench: the CPU a CTR worker and its servers spend on the sparse
// side of each batch, without gRPC and without the model: what the
// workers' "rows setup" and the servers' table work cost, measured in CPU
// time, so a busy machine does not move the numbers much.
//
//   bazel build --config=opt //bench:ctr_rows_bench
//   bazel-bin/bench/ctr_rows_bench --job=configs/ctr_wide_deep.json
//
// One process: --servers ParameterServerCores behind in-process shards
// (client/local_ps_shard.h, which serve a call on the calling thread),
// configured and given the job model's tables as the chief does; worker 0
// of --workers's shard of the job's training file (generate it first with
// `psctl local --job=...` or `psctl data synth-ctr`) streamed in the job's
// batches (data/batch_stream.h) for the job's epochs. Per step, in the
// order of an ASYNC worker's (worker/trainer_rows.cc): the next batch's
// BatchRows::Prepare and rows pull (StartPull + Wait), the current batch's
// row gradients written (a fixed pattern, untimed: the model's part) and
// its rows push (StartPush + Wait). Each round starts from fresh servers.
//
// Prints, per phase, the median over --rounds of the thread CPU time per
// example (ns): prepare (distinct ids, slots, buffers), pull and push on
// the client (routing, requests, the pull's scatter, the push's sums) and
// on the servers (the tables' lookups, row creation, Adagrad), and the
// batch stream's producer thread (the process's CPU less the main
// thread's).
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "client/batch_rows.h"
#include "client/local_ps_shard.h"
#include "client/ps_client.h"
#include "common/float_mode.h"
#include "common/job/job_config.h"
#include "common/process_setup.h"
#include "data/batch_stream.h"
#include "data/criteo.h"
#include "data/ctr_examples.h"
#include "model/registry.h"
#include "proto/protocol.h"
#include "ps/ps_core.h"

ABSL_FLAG(std::string, job, "configs/ctr_wide_deep.json",
          "A CRITEO job config: its model's tables, optimizer, batch size, "
          "epochs and training file");
ABSL_FLAG(int, servers, 2, "Parameter servers");
ABSL_FLAG(int, workers, 2, "Workers the training file is sharded over");
ABSL_FLAG(int, rounds, 3, "Rounds (fresh servers each; the median is shown)");
ABSL_FLAG(int, epochs, 0, "Epochs per round; 0: the job's");

namespace psflow {
namespace {

int64_t ThreadCpuNanos() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

int64_t ProcessCpuNanos() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

// A LocalPsShard whose rows calls (served on the calling thread) add their
// thread CPU time to `*server_nanos`: the servers' share of a rows call.
class TimedShard final : public PsShard {
 public:
  TimedShard(ParameterServerCore* core, std::string name, int64_t* server_nanos)
      : shard_(core, std::move(name)), server_nanos_(server_nanos) {}

  const std::string& name() const override { return shard_.name(); }
  absl::StatusOr<ConfigureResponse> Configure(const ConfigureRequest& request,
                                              absl::Time deadline) override {
    return shard_.Configure(request, deadline);
  }
  absl::Status CreateVariables(const CreateVariablesRequest& request,
                               absl::Time deadline) override {
    return shard_.CreateVariables(request, deadline);
  }
  absl::StatusOr<StatsResponse> Stats(absl::Time deadline) override {
    return shard_.Stats(deadline);
  }
  absl::Status Shutdown(const std::string& reason,
                        absl::Time deadline) override {
    return shard_.Shutdown(reason, deadline);
  }
  absl::Status ExcludeWorkers(const ExcludeWorkersRequest& request,
                              absl::Time deadline) override {
    return shard_.ExcludeWorkers(request, deadline);
  }
  absl::StatusOr<HoldResponse> Hold(const HoldRequest& request,
                                    absl::Time deadline) override {
    return shard_.Hold(request, deadline);
  }
  absl::StatusOr<SaveShardResponse> SaveShard(const SaveShardRequest& request,
                                              absl::Time deadline) override {
    return shard_.SaveShard(request, deadline);
  }
  absl::StatusOr<RestoreShardResponse> RestoreShard(
      const RestoreShardRequest& request, absl::Time deadline) override {
    return shard_.RestoreShard(request, deadline);
  }
  void PullBatch(
      const PullBatchRequest& header, std::vector<absl::Span<float>> out,
      absl::Time deadline,
      std::function<void(absl::StatusOr<PullBatchResponse>)> done) override {
    shard_.PullBatch(header, std::move(out), deadline, std::move(done));
  }
  void PushBatch(
      const PushBatchRequest& header, std::vector<absl::Span<const float>> data,
      std::shared_ptr<const void> owner, absl::Time deadline,
      std::function<void(absl::StatusOr<PushBatchResponse>)> done) override {
    shard_.PushBatch(header, std::move(data), std::move(owner), deadline,
                     std::move(done));
  }
  void PullRows(
      const PullRowsRequest& header, std::vector<absl::Span<const int64_t>> ids,
      std::vector<absl::Span<float>> out, absl::Time deadline,
      std::function<void(absl::StatusOr<PullRowsResponse>)> done) override {
    const int64_t start = ThreadCpuNanos();
    shard_.PullRows(header, std::move(ids), std::move(out), deadline,
                    std::move(done));
    *server_nanos_ += ThreadCpuNanos() - start;
  }
  void PushRows(
      const PushRowsRequest& header, std::vector<absl::Span<const int64_t>> ids,
      std::vector<absl::Span<const float>> gradients,
      std::shared_ptr<const void> owner, absl::Time deadline,
      std::function<void(absl::StatusOr<PushRowsResponse>)> done) override {
    const int64_t start = ThreadCpuNanos();
    shard_.PushRows(header, std::move(ids), std::move(gradients),
                    std::move(owner), deadline, std::move(done));
    *server_nanos_ += ThreadCpuNanos() - start;
  }
  void Assign(const AssignRequest& header, absl::Span<const float> data,
              std::shared_ptr<const void> owner, absl::Time deadline,
              std::function<void(absl::Status)> done) override {
    shard_.Assign(header, data, std::move(owner), deadline, std::move(done));
  }

 private:
  LocalPsShard shard_;
  int64_t* const server_nanos_;
};

// CPU nanoseconds of one round, by phase.
struct Phases {
  int64_t examples = 0, steps = 0;
  int64_t prepare = 0, pull_client = 0, pull_server = 0, push_client = 0,
          push_server = 0, producer = 0;
};

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "ctr_rows_bench: %s\n",
               std::string(status.message()).c_str());
  return 1;
}

absl::Status RunRound(const JobConfig& job,
                      const std::vector<ModelTable>& tables,
                      std::shared_ptr<const CtrExamples> shard, int epochs,
                      Phases& phases) {
  int64_t server_nanos = 0;
  std::vector<std::unique_ptr<ParameterServerCore>> cores;
  std::vector<std::unique_ptr<PsShard>> shards;
  for (int i = 0; i < absl::GetFlag(FLAGS_servers); ++i) {
    cores.push_back(
        std::make_unique<ParameterServerCore>(ParameterServerCore::Options{}));
    shards.push_back(std::make_unique<TimedShard>(
        cores.back().get(), absl::StrCat("ps-", i), &server_nanos));
  }
  ParameterClient client(std::move(shards), Placement(),
                         ParameterClient::Options());
  ConfigureRequest config;
  config.set_protocol_version(kProtocolVersion);
  *config.mutable_optimizer() = job.optimizer();
  *config.mutable_learning_rate() = job.learning_rate();
  config.set_mode(job.training().mode());
  config.set_num_workers(absl::GetFlag(FLAGS_workers));
  config.set_replicas_to_aggregate(1);
  if (absl::Status s = client.Configure(config); !s.ok()) return s;
  std::vector<EmbeddingTableSpec> specs;
  for (const ModelTable& t : tables) specs.push_back(t.spec);
  if (absl::Status s = client.CreateTables(specs); !s.ok()) return s;

  BatchStream::Options options;
  options.batch_size = job.training().batch_size();
  options.seed = job.training().seed();
  options.epochs = epochs;
  const int64_t process_start = ProcessCpuNanos();
  const int64_t thread_start = ThreadCpuNanos();
  BatchStream batches(shard, options);
  // As a trainer stages them: the next batch prepared and its rows pulled
  // before the current one's rows are pushed.
  BatchRows rows[2] = {BatchRows(tables), BatchRows(tables)};
  std::optional<Batch> staged[2];
  int current = 0;
  auto stage = [&](int slot) -> absl::Status {
    staged[slot] = batches.Next();
    if (!staged[slot].has_value()) return absl::OkStatus();
    const int64_t t0 = ThreadCpuNanos();
    if (absl::Status s = rows[slot].Prepare(*staged[slot]); !s.ok()) return s;
    const int64_t t1 = ThreadCpuNanos();
    phases.prepare += t1 - t0;
    const int64_t server_before = server_nanos;
    if (absl::Status s =
            rows[slot].StartPull(client, /*train=*/true, 0)->Wait();
        !s.ok()) {
      return s;
    }
    const int64_t t2 = ThreadCpuNanos();
    phases.pull_server += server_nanos - server_before;
    phases.pull_client += (t2 - t1) - (server_nanos - server_before);
    return absl::OkStatus();
  };
  if (absl::Status s = stage(current); !s.ok()) return s;
  while (staged[current].has_value()) {
    if (absl::Status s = stage(1 - current); !s.ok()) return s;
    // The model's part, untimed: every row gradient written.
    const SparseBatch& sparse = rows[current].sparse();
    for (const absl::Span<float>& g : sparse.row_gradients) {
      for (size_t k = 0; k < g.size(); ++k) {
        g[k] = 1e-3f * static_cast<float>(static_cast<int>(k % 7) - 3);
      }
    }
    const int64_t server_before = server_nanos;
    const int64_t t3 = ThreadCpuNanos();
    if (absl::Status s = rows[current].StartPush(client, 0, 0)->Wait();
        !s.ok()) {
      return s;
    }
    const int64_t t4 = ThreadCpuNanos();
    phases.push_server += server_nanos - server_before;
    phases.push_client += (t4 - t3) - (server_nanos - server_before);
    phases.examples += staged[current]->size;
    ++phases.steps;
    staged[current].reset();
    current = 1 - current;
  }
  // The process's CPU less the main thread's: the batch stream's producer
  // thread (the shards' watcher threads sleep).
  phases.producer = std::max<int64_t>(0, (ProcessCpuNanos() - process_start) -
                                             (ThreadCpuNanos() - thread_start));
  return absl::OkStatus();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main() {
  absl::StatusOr<JobConfig> job = LoadJobConfigFile(absl::GetFlag(FLAGS_job));
  if (!job.ok()) return Fail(job.status());
  if (job->data().format() != DataConfig::CRITEO) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat(absl::GetFlag(FLAGS_job),
                     " is not a CRITEO job; give a CTR job config")));
  }
  absl::StatusOr<CtrExamples> train =
      LoadCriteoFile(job->data().train_path(), CriteoFormatOf(job->data()));
  if (!train.ok()) {
    return Fail(absl::Status(
        train.status().code(),
        absl::StrCat(train.status().message(),
                     " (generate the job's data first: psctl local --job=",
                     absl::GetFlag(FLAGS_job),
                     " does, as does psctl data "
                     "synth-ctr)")));
  }
  const InputSpec input{{train->num_dense}, 2, train->num_fields};
  absl::StatusOr<std::unique_ptr<ModelDefinition>> definition =
      DefineModel(job->model(), input);
  if (!definition.ok()) return Fail(definition.status());
  const std::vector<ModelTable> tables = (*definition)->tables();
  if (tables.empty()) {
    return Fail(absl::InvalidArgumentError("the job's model has no tables"));
  }
  auto shard = std::make_shared<const CtrExamples>(
      CtrShardOf(*train, 0, absl::GetFlag(FLAGS_workers)));
  const int epochs =
      absl::GetFlag(FLAGS_epochs) > 0
          ? absl::GetFlag(FLAGS_epochs)
          : std::max(1, static_cast<int>(std::ceil(job->training().epochs())));

  std::vector<Phases> rounds;
  for (int r = 0; r < std::max(1, absl::GetFlag(FLAGS_rounds)); ++r) {
    Phases phases;
    if (absl::Status s = RunRound(*job, tables, shard, epochs, phases);
        !s.ok()) {
      return Fail(s);
    }
    rounds.push_back(phases);
  }
  std::printf(
      "%s: worker 0 of %d (%lld examples), %d epochs, batch %d, %d servers, "
      "%lld steps a round; CPU ns per example, median of %zu rounds:\n",
      absl::GetFlag(FLAGS_job).c_str(), absl::GetFlag(FLAGS_workers),
      static_cast<long long>(shard->num_examples), epochs,
      job->training().batch_size(), absl::GetFlag(FLAGS_servers),
      static_cast<long long>(rounds[0].steps), rounds.size());
  const struct {
    const char* name;
    int64_t Phases::*field;
  } kPhases[] = {{"prepare", &Phases::prepare},
                 {"pull, client", &Phases::pull_client},
                 {"pull, servers", &Phases::pull_server},
                 {"push, client", &Phases::push_client},
                 {"push, servers", &Phases::push_server},
                 {"batch stream", &Phases::producer}};
  double client_total = 0, total = 0;
  for (const auto& phase : kPhases) {
    std::vector<double> per_example;
    for (const Phases& p : rounds) {
      per_example.push_back(
          static_cast<double>(p.*phase.field) /
          static_cast<double>(std::max<int64_t>(1, p.examples)));
    }
    const double median = Median(per_example);
    std::printf("  %-14s %8.1f ns  (rounds: %.1f .. %.1f)\n", phase.name,
                median,
                *std::min_element(per_example.begin(), per_example.end()),
                *std::max_element(per_example.begin(), per_example.end()));
    total += median;
    if (phase.field != &Phases::pull_server &&
        phase.field != &Phases::push_server) {
      client_total += median;
    }
  }
  std::printf("  %-14s %8.1f ns  (worker side %.1f, servers %.1f)\n", "total",
              total, client_total, total - client_total);
  return 0;
}

}  // namespace
}  // namespace psflow

int main(int argc, char** argv) {
  psflow::SetUpProcessForBulkTransfers();
  psflow::EnableFlushToZero();
  absl::ParseCommandLine(argc, argv);
  return psflow::Main();
}
