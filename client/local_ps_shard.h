// The in-process twin of a parameter server: a PsShard over the same
// transport-free PsService (ps/ps_service.h) the gRPC server uses, so both
// share every rule. Tests run whole clusters in one process with it, and
// the conformance suite checks it behaves like the gRPC path.
//
// A pull that waits for a step waits without a thread; one watcher thread
// per shard cancels waiting pulls at their deadlines.
//
// Thread-safe. The core must outlive the shard.
#ifndef PSFLOW_CLIENT_LOCAL_PS_SHARD_H_
#define PSFLOW_CLIENT_LOCAL_PS_SHARD_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "client/ps_shard.h"
#include "common/mutex.h"
#include "ps/ps_core.h"
#include "ps/ps_service.h"

namespace psflow {

class LocalPsShard final : public PsShard {
 public:
  LocalPsShard(ParameterServerCore* core, std::string name);
  ~LocalPsShard() override;

  const std::string& name() const override { return name_; }
  absl::StatusOr<ConfigureResponse> Configure(const ConfigureRequest& request,
                                              absl::Time deadline) override;
  absl::Status CreateVariables(const CreateVariablesRequest& request,
                               absl::Time deadline) override;
  absl::StatusOr<StatsResponse> Stats(absl::Time deadline) override;
  absl::Status Shutdown(const std::string& reason,
                        absl::Time deadline) override;
  absl::Status ExcludeWorkers(const ExcludeWorkersRequest& request,
                              absl::Time deadline) override;
  absl::StatusOr<HoldResponse> Hold(const HoldRequest& request,
                                    absl::Time deadline) override;
  absl::StatusOr<SaveShardResponse> SaveShard(const SaveShardRequest& request,
                                              absl::Time deadline) override;
  absl::StatusOr<RestoreShardResponse> RestoreShard(
      const RestoreShardRequest& request, absl::Time deadline) override;
  void PullRows(
      const PullRowsRequest& header, std::vector<absl::Span<const int64_t>> ids,
      std::vector<absl::Span<float>> out, absl::Time deadline,
      std::function<void(absl::StatusOr<PullRowsResponse>)> done) override;
  void PushRows(
      const PushRowsRequest& header, std::vector<absl::Span<const int64_t>> ids,
      std::vector<absl::Span<const float>> gradients,
      std::shared_ptr<const void> owner, absl::Time deadline,
      std::function<void(absl::StatusOr<PushRowsResponse>)> done) override;
  void PullBatch(
      const PullBatchRequest& header, std::vector<absl::Span<float>> out,
      absl::Time deadline,
      std::function<void(absl::StatusOr<PullBatchResponse>)> done) override;
  void PushBatch(
      const PushBatchRequest& header, std::vector<absl::Span<const float>> data,
      std::shared_ptr<const void> owner, absl::Time deadline,
      std::function<void(absl::StatusOr<PushBatchResponse>)> done) override;
  void Assign(const AssignRequest& header, absl::Span<const float> data,
              std::shared_ptr<const void> owner, absl::Time deadline,
              std::function<void(absl::Status)> done) override;

  // Whether Shutdown() was called (the twin has no process to stop).
  bool shutdown_requested() const;

 private:
  // Cancels `pull` at `deadline` unless it answered by then.
 public:
  // Cancels every pull waiting for a step (DeadlineExceeded, as at its
  // deadline).
  void CancelInFlight() override;

 private:
  // (A dense pull or a rows pull; the watcher keeps only weak references.)
  template <typename Pending>
  void CancelAt(absl::Time deadline, std::shared_ptr<Pending> pull) {
    if (pull == nullptr) return;  // answered already
    std::weak_ptr<Pending> weak = pull;
    MutexLock lock(&mu_);
    deadlines_.emplace(deadline, [weak] {
      if (auto pending = weak.lock()) pending->Cancel();
    });
  }
  void WatchDeadlines();

  ParameterServerCore* const core_;
  PsService service_;
  const std::string name_;
  mutable Mutex mu_;
  bool shutdown_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Waiting pulls by deadline; an answered pull is cancelled harmlessly.
  std::multimap<absl::Time, std::function<void()>> deadlines_
      ABSL_GUARDED_BY(mu_);
  std::thread watcher_;
};

}  // namespace psflow

#endif  // PSFLOW_CLIENT_LOCAL_PS_SHARD_H_
