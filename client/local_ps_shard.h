// The in-process twin of a parameter server: a PsShard that calls a
// ParameterServerCore directly. Tests run whole clusters in one process
// with it, and the conformance suite checks it behaves like the gRPC path.
//
// Thread-safe. The core must outlive the shard.
#ifndef PSFLOW_CLIENT_LOCAL_PS_SHARD_H_
#define PSFLOW_CLIENT_LOCAL_PS_SHARD_H_

#include <string>

#include "client/ps_shard.h"
#include "ps/ps_core.h"

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
  absl::StatusOr<HoldResponse> Hold(const HoldRequest& request,
                                    absl::Time deadline) override;
  absl::StatusOr<SaveShardResponse> SaveShard(const SaveShardRequest& request,
                                              absl::Time deadline) override;
  absl::StatusOr<RestoreShardResponse> RestoreShard(
      const RestoreShardRequest& request, absl::Time deadline) override;
  void Pull(const PullRequest& header, absl::Span<float> out,
            absl::Time deadline,
            std::function<void(absl::StatusOr<PullResponse>)> done) override;
  void Push(const PushRequest& header, absl::Span<const float> data,
            std::shared_ptr<const void> owner, absl::Time deadline,
            std::function<void(absl::StatusOr<PushResponse>)> done) override;
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
  ParameterServerCore* const core_;
  const std::string name_;
  mutable absl::Mutex mu_;
  bool shutdown_requested_ ABSL_GUARDED_BY(mu_) = false;
  int waiting_pulls_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace psflow

#endif  // PSFLOW_CLIENT_LOCAL_PS_SHARD_H_
