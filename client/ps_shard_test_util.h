// Test helpers: one range of one variable pulled or pushed through a
// PsShard as a batch of one part, waiting for the answer, with the part's
// outcome as the call's (the way the protocol 1 single calls answered).
#ifndef PSFLOW_CLIENT_PS_SHARD_TEST_UTIL_H_
#define PSFLOW_CLIENT_PS_SHARD_TEST_UTIL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/ps_shard.h"
#include "proto/protocol.h"
#include "proto/ps.pb.h"

namespace psflow::testing {

// Pulls out.size() values of `variable` from `offset`.
absl::StatusOr<PullResponse> PullOne(PsShard& shard,
                                     const std::string& variable,
                                     int64_t offset, absl::Span<float> out,
                                     int64_t min_version, absl::Time deadline);

// Pushes `gradient` to `variable` from `offset`, declaring `num_elements`
// (-1: the gradient's size) so tests can send a mismatched payload.
struct PushOptions {
  int64_t version = 0;
  int worker = 0;
  uint32_t protocol = kProtocolVersion;
  int64_t num_elements = -1;
};
absl::StatusOr<PushResponse> PushOne(
    PsShard& shard, const std::string& variable, int64_t offset,
    std::shared_ptr<const std::vector<float>> gradient, absl::Time deadline,
    const PushOptions& options = {});

// Pulls the rows of `ids` of embedding table `table` (out: ids x dim) for
// training, as a request of one part, with an optional header field set.
absl::StatusOr<PullRowsResponse> PullRowsOne(
    PsShard& shard, const std::string& table, const std::vector<int64_t>& ids,
    absl::Span<float> out, absl::Time deadline,
    const std::function<void(PullRowsRequest&)>& shape = nullptr);

// Pushes `gradients` (ids x dim) for `ids` of `table`; the call's status
// is its one part's outcome.
absl::StatusOr<PushRowsResponse> PushRowsOne(
    PsShard& shard, const std::string& table, std::vector<int64_t> ids,
    std::vector<float> gradients, absl::Time deadline,
    const std::function<void(PushRowsRequest&)>& shape = nullptr);

// A server that took the job's configuration and now answers every call
// with `error` (a refused connection, a server gone silent). Its Stats
// fail the same way unless `stats_answer` (a server that is up but
// refuses the data calls). Tests override the calls they shape.
class FailingShard : public PsShard {
 public:
  FailingShard(std::string name, absl::Status error, bool stats_answer = false)
      : name_(std::move(name)),
        error_(std::move(error)),
        stats_answer_(stats_answer) {}

  const std::string& name() const override { return name_; }
  absl::StatusOr<ConfigureResponse> Configure(const ConfigureRequest&,
                                              absl::Time) override;
  absl::Status CreateVariables(const CreateVariablesRequest&,
                               absl::Time) override {
    return error_;
  }
  absl::StatusOr<StatsResponse> Stats(absl::Time) override;
  absl::Status Shutdown(const std::string&, absl::Time) override {
    return error_;
  }
  absl::Status ExcludeWorkers(const ExcludeWorkersRequest&,
                              absl::Time) override {
    return error_;
  }
  absl::StatusOr<HoldResponse> Hold(const HoldRequest&, absl::Time) override {
    return error_;
  }
  absl::StatusOr<SaveShardResponse> SaveShard(const SaveShardRequest&,
                                              absl::Time) override {
    return error_;
  }
  absl::StatusOr<RestoreShardResponse> RestoreShard(const RestoreShardRequest&,
                                                    absl::Time) override {
    return error_;
  }
  void PullBatch(
      const PullBatchRequest&, std::vector<absl::Span<float>>, absl::Time,
      std::function<void(absl::StatusOr<PullBatchResponse>)> done) override {
    done(error_);
  }
  void PushBatch(
      const PushBatchRequest&, std::vector<absl::Span<const float>>,
      std::shared_ptr<const void>, absl::Time,
      std::function<void(absl::StatusOr<PushBatchResponse>)> done) override {
    done(error_);
  }
  void PullRows(
      const PullRowsRequest&, std::vector<absl::Span<const int64_t>>,
      std::vector<absl::Span<float>>, absl::Time,
      std::function<void(absl::StatusOr<PullRowsResponse>)> done) override {
    done(error_);
  }
  void PushRows(
      const PushRowsRequest&, std::vector<absl::Span<const int64_t>>,
      std::vector<absl::Span<const float>>, std::shared_ptr<const void>,
      absl::Time,
      std::function<void(absl::StatusOr<PushRowsResponse>)> done) override {
    done(error_);
  }
  void Assign(const AssignRequest&, absl::Span<const float>,
              std::shared_ptr<const void>, absl::Time,
              std::function<void(absl::Status)> done) override {
    done(error_);
  }

  // Stats calls so far (from any thread).
  int stats_calls() const { return stats_calls_; }

 private:
  const std::string name_;
  const absl::Status error_;
  const bool stats_answer_;
  std::atomic<int> stats_calls_{0};
};

}  // namespace psflow::testing

#endif  // PSFLOW_CLIENT_PS_SHARD_TEST_UTIL_H_
