#include "client/local_ps_shard.h"

#include <utility>

#include "common/status_macros.h"
#include "ps/shard_checkpoint.h"

namespace psflow {

LocalPsShard::LocalPsShard(ParameterServerCore* core, std::string name)
    : core_(core),
      service_(core, /*pool=*/nullptr),  // every pull has its buffers
      name_(std::move(name)),
      watcher_([this] { WatchDeadlines(); }) {}

LocalPsShard::~LocalPsShard() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  watcher_.join();
  // Pulls still waiting answer DeadlineExceeded now: their callers hear
  // back, and no wait refers to this shard afterwards.
  std::multimap<absl::Time, std::function<void()>> left;
  {
    MutexLock lock(&mu_);
    left.swap(deadlines_);
  }
  for (auto& [deadline, cancel] : left) cancel();
}

void LocalPsShard::CancelInFlight() {
  std::multimap<absl::Time, std::function<void()>> waiting;
  {
    MutexLock lock(&mu_);
    waiting.swap(deadlines_);
  }
  for (auto& [deadline, cancel] : waiting) cancel();
}

void LocalPsShard::WatchDeadlines() {
  MutexLock lock(&mu_);
  while (!stopping_) {
    const absl::Time next =
        deadlines_.empty() ? absl::InfiniteFuture() : deadlines_.begin()->first;
    if (next <= absl::Now()) {
      std::function<void()> cancel = std::move(deadlines_.begin()->second);
      deadlines_.erase(deadlines_.begin());
      mu_.Unlock();
      cancel();
      mu_.Lock();
      continue;
    }
    // Wakes for the earliest deadline, a new earlier one, or stopping.
    const size_t size = deadlines_.size();
    auto changed = [this, size, next]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || deadlines_.size() != size ||
             (!deadlines_.empty() && deadlines_.begin()->first != next);
    };
    mu_.AwaitWithDeadline(Condition(&changed), next);
  }
}

absl::StatusOr<ConfigureResponse> LocalPsShard::Configure(
    const ConfigureRequest& request, absl::Time) {
  return core_->Configure(request);
}

absl::Status LocalPsShard::CreateVariables(
    const CreateVariablesRequest& request, absl::Time) {
  return core_->CreateVariables(request);
}

absl::StatusOr<StatsResponse> LocalPsShard::Stats(absl::Time) {
  return core_->Stats();
}

absl::Status LocalPsShard::Shutdown(const std::string&, absl::Time) {
  MutexLock lock(&mu_);
  shutdown_requested_ = true;
  return absl::OkStatus();
}

absl::Status LocalPsShard::ExcludeWorkers(const ExcludeWorkersRequest& request,
                                          absl::Time) {
  return core_->ExcludeWorkers(request);
}

absl::StatusOr<HoldResponse> LocalPsShard::Hold(const HoldRequest& request,
                                                absl::Time) {
  return core_->Hold(request);
}

absl::StatusOr<SaveShardResponse> LocalPsShard::SaveShard(
    const SaveShardRequest& request, absl::Time deadline) {
  return psflow::SaveShard(*core_, request, deadline);
}

absl::StatusOr<RestoreShardResponse> LocalPsShard::RestoreShard(
    const RestoreShardRequest& request, absl::Time) {
  return psflow::RestoreShard(*core_, request);
}

bool LocalPsShard::shutdown_requested() const {
  MutexLock lock(&mu_);
  return shutdown_requested_;
}

void LocalPsShard::PullBatch(
    const PullBatchRequest& header, std::vector<absl::Span<float>> out,
    absl::Time deadline,
    std::function<void(absl::StatusOr<PullBatchResponse>)> done) {
  if (out.empty()) {
    return done(absl::InvalidArgumentError("pull batch without buffers"));
  }
  CancelAt(deadline,
           service_.Pull(header, std::move(out),
                         [done = std::move(done)](
                             absl::StatusOr<PsService::PullAnswer> answer) {
                           if (!answer.ok()) return done(answer.status());
                           done(std::move(answer->response));
                         }));
}

void LocalPsShard::PushBatch(
    const PushBatchRequest& header, std::vector<absl::Span<const float>> data,
    std::shared_ptr<const void>, absl::Time,
    std::function<void(absl::StatusOr<PushBatchResponse>)> done) {
  absl::StatusOr<std::vector<ChunkRef>> refs = service_.ResolvePush(header);
  if (!refs.ok()) return done(refs.status());
  done(service_.Push(header, *refs, data));
}

void LocalPsShard::PullRows(
    const PullRowsRequest& header, std::vector<absl::Span<const int64_t>> ids,
    std::vector<absl::Span<float>> out, absl::Time deadline,
    std::function<void(absl::StatusOr<PullRowsResponse>)> done) {
  if (out.empty()) {
    return done(absl::InvalidArgumentError("rows pull without buffers"));
  }
  CancelAt(deadline,
           service_.PullRows(header, std::move(ids), std::move(out),
                             [done = std::move(done)](
                                 absl::StatusOr<PsService::RowsAnswer> answer) {
                               if (!answer.ok()) return done(answer.status());
                               done(std::move(answer->response));
                             }));
}

void LocalPsShard::PushRows(
    const PushRowsRequest& header, std::vector<absl::Span<const int64_t>> ids,
    std::vector<absl::Span<const float>> gradients, std::shared_ptr<const void>,
    absl::Time, std::function<void(absl::StatusOr<PushRowsResponse>)> done) {
  absl::StatusOr<std::vector<EmbeddingTable*>> tables =
      service_.ResolvePushRows(header);
  if (!tables.ok()) return done(tables.status());
  done(service_.PushRows(header, *tables, ids, gradients));
}

void LocalPsShard::Assign(const AssignRequest& header,
                          absl::Span<const float> data,
                          std::shared_ptr<const void>, absl::Time,
                          std::function<void(absl::Status)> done) {
  absl::StatusOr<ChunkRef> ref = service_.ResolveAssign(header);
  if (!ref.ok()) return done(ref.status());
  done(service_.Assign(*ref, data));
}

}  // namespace psflow
