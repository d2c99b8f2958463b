#include "tests/in_process_job.h"

#include <atomic>
#include <deque>
#include <functional>
#include <limits>
#include <thread>
#include <utility>

#include "client/local_ps_shard.h"
#include "common/job/placement.h"
#include "common/mutex.h"
#include "common/status_macros.h"
#include "model/initializer.h"
#include "model/registry.h"
#include "proto/protocol.h"

namespace psflow::testing {
namespace {

// The job's one parameter server as the client sees it: every call goes to
// a LocalPsShard over the server's current core. Restart() puts a fresh,
// unconfigured core behind it, as a restarted ps_server process is.
// Heap memory standing for a piece of a shared region.
class RetirableBuffer final : public SharedBuffer {
 public:
  explicit RetirableBuffer(int64_t elements) : values_(elements) {}
  absl::Span<float> span() override { return absl::MakeSpan(values_); }
  bool retired() const override { return retired_; }
  void Retire() { retired_ = true; }

 private:
  std::vector<float> values_;
  std::atomic<bool> retired_{false};
};

class RestartableShard final : public PsShard {
 public:
  explicit RestartableShard(ParameterServerCore* core) { Restart(core); }

  ~RestartableShard() override {
    {
      MutexLock lock(&mu_);
      closing_ = true;
    }
    if (pusher_.joinable()) pusher_.join();
  }

  // From now on each push reaches the server `delay` after it was sent,
  // in order, while pulls are answered at once: a pull sent before the
  // push it should follow was answered sees the values without it.
  void DeferPushes(absl::Duration delay) {
    MutexLock lock(&mu_);
    push_delay_ = delay;
    if (!pusher_.joinable()) pusher_ = std::thread([this] { ApplyDeferred(); });
  }

  // From now on a push of a gradient computed at `version` or later fails
  // (Unavailable, as a connection reset would) without reaching the
  // server.
  void FailPushesFrom(int64_t version, int64_t count) {
    MutexLock lock(&mu_);
    fail_rules_.push_back(FailRule{version, count});
  }

  // From now on hands out memory as a server on this host shares it (heap
  // memory here), and a push that fails from such memory retires it, as
  // the shared-memory decorator does (the server might still read it).
  void ShareMemory() {
    MutexLock lock(&mu_);
    share_ = true;
  }
  int shared_allocations() {
    MutexLock lock(&mu_);
    return shared_allocations_;
  }
  void RefuseSharedAllocations(int after, int count) {
    MutexLock lock(&mu_);
    refuse_after_ = after;
    refuse_shared_ = count;
  }
  std::shared_ptr<SharedBuffer> AllocateShared(int64_t elements) override {
    MutexLock lock(&mu_);
    if (!share_) return nullptr;
    if (shared_allocations_ >= refuse_after_ && refuse_shared_ > 0) {
      --refuse_shared_;
      return nullptr;
    }
    auto buffer = std::make_shared<RetirableBuffer>(elements);
    shared_.push_back(buffer);
    ++shared_allocations_;
    return buffer;
  }
  int64_t failed_pushes() {
    MutexLock lock(&mu_);
    return failed_pushes_;
  }

  void Restart(ParameterServerCore* core) {
    auto next = std::make_shared<LocalPsShard>(core, name_);
    MutexLock lock(&mu_);
    current_ = std::move(next);
  }

  const std::string& name() const override { return name_; }
  absl::StatusOr<ConfigureResponse> Configure(const ConfigureRequest& request,
                                              absl::Time deadline) override {
    return Current()->Configure(request, deadline);
  }
  absl::Status CreateVariables(const CreateVariablesRequest& request,
                               absl::Time deadline) override {
    return Current()->CreateVariables(request, deadline);
  }
  absl::StatusOr<StatsResponse> Stats(absl::Time deadline) override {
    return Current()->Stats(deadline);
  }
  absl::Status Shutdown(const std::string& reason,
                        absl::Time deadline) override {
    return Current()->Shutdown(reason, deadline);
  }
  absl::Status ExcludeWorkers(const ExcludeWorkersRequest& request,
                              absl::Time deadline) override {
    return Current()->ExcludeWorkers(request, deadline);
  }
  absl::StatusOr<HoldResponse> Hold(const HoldRequest& request,
                                    absl::Time deadline) override {
    return Current()->Hold(request, deadline);
  }
  absl::StatusOr<SaveShardResponse> SaveShard(const SaveShardRequest& request,
                                              absl::Time deadline) override {
    return Current()->SaveShard(request, deadline);
  }
  absl::StatusOr<RestoreShardResponse> RestoreShard(
      const RestoreShardRequest& request, absl::Time deadline) override {
    return Current()->RestoreShard(request, deadline);
  }
  void PullBatch(
      const PullBatchRequest& header, std::vector<absl::Span<float>> out,
      absl::Time deadline,
      std::function<void(absl::StatusOr<PullBatchResponse>)> done) override {
    Current()->PullBatch(header, std::move(out), deadline, std::move(done));
  }
  void PushBatch(
      const PushBatchRequest& header, std::vector<absl::Span<const float>> data,
      std::shared_ptr<const void> owner, absl::Time deadline,
      std::function<void(absl::StatusOr<PushBatchResponse>)> done) override {
    bool fail = false;
    {
      MutexLock lock(&mu_);
      for (FailRule& rule : fail_rules_) {
        if (header.version() >= rule.from && rule.left > 0) {
          --rule.left;
          fail = true;
          break;
        }
      }
      if (fail) {
        ++failed_pushes_;
        RetireSharedUnder(data);
      }
    }
    if (fail) {
      return done(absl::UnavailableError("recvmsg: Connection reset by peer"));
    }
    {
      MutexLock lock(&mu_);
      if (push_delay_ > absl::ZeroDuration()) {
        deferred_.push_back(Deferred{
            absl::Now() + push_delay_,
            [this, header, data = std::move(data), owner = std::move(owner),
             deadline, done = std::move(done)]() mutable {
              Current()->PushBatch(header, std::move(data), std::move(owner),
                                   deadline, std::move(done));
            }});
        return;
      }
    }
    Current()->PushBatch(header, std::move(data), std::move(owner), deadline,
                         std::move(done));
  }
  void PullRows(
      const PullRowsRequest& header, std::vector<absl::Span<const int64_t>> ids,
      std::vector<absl::Span<float>> out, absl::Time deadline,
      std::function<void(absl::StatusOr<PullRowsResponse>)> done) override {
    Current()->PullRows(header, std::move(ids), std::move(out), deadline,
                        std::move(done));
  }
  void PushRows(
      const PushRowsRequest& header, std::vector<absl::Span<const int64_t>> ids,
      std::vector<absl::Span<const float>> gradients,
      std::shared_ptr<const void> owner, absl::Time deadline,
      std::function<void(absl::StatusOr<PushRowsResponse>)> done) override {
    Current()->PushRows(header, std::move(ids), std::move(gradients),
                        std::move(owner), deadline, std::move(done));
  }
  void CancelInFlight() override { Current()->CancelInFlight(); }
  void Close() override { Current()->Close(); }
  void Assign(const AssignRequest& header, absl::Span<const float> data,
              std::shared_ptr<const void> owner, absl::Time deadline,
              std::function<void(absl::Status)> done) override {
    Current()->Assign(header, data, std::move(owner), deadline,
                      std::move(done));
  }

 private:
  // Retires the shared memory `data` lies in.
  void RetireSharedUnder(const std::vector<absl::Span<const float>>& data)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const std::weak_ptr<RetirableBuffer>& weak : shared_) {
      std::shared_ptr<RetirableBuffer> buffer = weak.lock();
      if (buffer == nullptr) continue;
      const float* begin = buffer->span().data();
      const float* end = begin + buffer->span().size();
      for (absl::Span<const float> piece : data) {
        if (piece.data() >= begin && piece.data() < end) buffer->Retire();
      }
    }
  }

  std::shared_ptr<LocalPsShard> Current() {
    MutexLock lock(&mu_);
    return current_;
  }

  // DeferPushes' thread: sends each push once its time has come (all at
  // once when the shard closes).
  void ApplyDeferred() {
    while (true) {
      std::function<void()> send;
      absl::Time due;
      {
        MutexLock lock(&mu_);
        mu_.Await(Condition(this, &RestartableShard::PusherHasWork));
        if (deferred_.empty()) return;  // closing
        send = std::move(deferred_.front().send);
        due = closing_ ? absl::Now() : deferred_.front().due;
        deferred_.pop_front();
      }
      absl::SleepFor(due - absl::Now());
      send();
    }
  }

  bool PusherHasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closing_ || !deferred_.empty();
  }

  struct Deferred {
    absl::Time due;
    std::function<void()> send;
  };

  const std::string name_ = "ps-0";
  Mutex mu_;
  std::shared_ptr<LocalPsShard> current_ ABSL_GUARDED_BY(mu_);
  absl::Duration push_delay_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  std::deque<Deferred> deferred_ ABSL_GUARDED_BY(mu_);
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  // FailPushesFrom's, each used up on its own.
  struct FailRule {
    int64_t from;
    int64_t left;
  };
  std::vector<FailRule> fail_rules_ ABSL_GUARDED_BY(mu_);
  bool share_ ABSL_GUARDED_BY(mu_) = false;
  int shared_allocations_ ABSL_GUARDED_BY(mu_) = 0;
  int refuse_after_ ABSL_GUARDED_BY(mu_) = 0;
  int refuse_shared_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::weak_ptr<RetirableBuffer>> shared_ ABSL_GUARDED_BY(mu_);
  int64_t failed_pushes_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread pusher_;
};

}  // namespace

JobSpec SoftmaxRegressionSpec(UpdateMode mode, int64_t total_steps,
                              double learning_rate) {
  JobSpec spec;
  spec.mutable_config()->mutable_model()->mutable_softmax_regression();
  spec.mutable_config()->mutable_training()->set_mode(mode);
  spec.set_total_steps(total_steps);
  spec.set_num_workers(1);
  spec.add_example_shape(4);
  spec.set_num_classes(2);
  ConfigureRequest& ps = *spec.mutable_ps_config();
  ps.set_protocol_version(kProtocolVersion);
  ps.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
  ps.mutable_learning_rate()->set_learning_rate(learning_rate);
  ps.set_mode(mode);
  ps.set_num_workers(1);
  ps.set_replicas_to_aggregate(1);
  return spec;
}

absl::StatusOr<std::unique_ptr<InProcessJob>> InProcessJob::Start(
    const JobSpec& spec, const TaskId& self, bool configure_servers,
    Clock* clock) {
  auto job = std::make_unique<InProcessJob>();
  ASSIGN_OR_RETURN(job->definition, DefineJobModel(spec));
  job->variables = LogicalVariables(job->definition->variables());
  ASSIGN_OR_RETURN(Placement placement,
                   PlaceVariables(job->variables, 1, 1 << 20));
  for (const ModelTable& t : job->definition->tables()) {
    placement.tables.push_back({t.name(), t.dim()});
  }
  job->core =
      std::make_unique<ParameterServerCore>(ParameterServerCore::Options{});
  std::vector<std::unique_ptr<PsShard>> shards;
  auto shard = std::make_unique<RestartableShard>(job->core.get());
  job->shard_ = shard.get();
  shards.push_back(std::move(shard));
  job->client = std::make_unique<ParameterClient>(std::move(shards), placement,
                                                  ParameterClient::Options());
  if (configure_servers) RETURN_IF_ERROR(job->ConfigureServers(spec));
  JobCoordinator::Options options;
  options.num_workers = spec.num_workers();
  options.clock = clock;
  job->coordinator = std::make_unique<JobCoordinator>(options);
  job->coordinator->SetSpec(spec);
  job->chief =
      std::make_unique<LocalCoordinatorClient>(job->coordinator.get(), self);
  return job;
}

void InProcessJob::DeferPushes(absl::Duration delay) {
  static_cast<RestartableShard*>(shard_)->DeferPushes(delay);
}

void InProcessJob::ShareMemory() {
  static_cast<RestartableShard*>(shard_)->ShareMemory();
}

void InProcessJob::RefuseSharedAllocations(int after, int count) {
  static_cast<RestartableShard*>(shard_)->RefuseSharedAllocations(after, count);
}

int InProcessJob::shared_allocations() const {
  return static_cast<RestartableShard*>(shard_)->shared_allocations();
}

void InProcessJob::FailPushesFrom(int64_t version, int64_t count) {
  static_cast<RestartableShard*>(shard_)->FailPushesFrom(version, count);
}

int64_t InProcessJob::failed_pushes() const {
  return static_cast<RestartableShard*>(shard_)->failed_pushes();
}

void InProcessJob::RestartServer() {
  // The old core stays alive: a call under way may still use it.
  retired_cores_.push_back(std::move(core));
  core = std::make_unique<ParameterServerCore>(ParameterServerCore::Options{});
  static_cast<RestartableShard*>(shard_)->Restart(core.get());
}

absl::Status InProcessJob::ConfigureServers(const JobSpec& spec) {
  std::vector<EmbeddingTableSpec> tables;
  for (const ModelTable& t : definition->tables()) tables.push_back(t.spec);
  RETURN_IF_ERROR(client->Configure(spec.ps_config()));
  RETURN_IF_ERROR(client->CreateVariables());
  RETURN_IF_ERROR(client->CreateTables(tables));
  const std::vector<std::vector<float>> initial =
      InitialValues(definition->variables(), 1);
  std::vector<ParameterClient::Const> values;
  for (size_t i = 0; i < variables.size(); ++i) {
    values.emplace_back(variables[i].name, initial[i]);
  }
  return client->Assign(values)->Wait();
}

}  // namespace psflow::testing
