#include "client/ps_shard_test_util.h"

#include <utility>

#include "common/mutex.h"

namespace psflow::testing {

absl::StatusOr<PullResponse> PullOne(PsShard& shard,
                                     const std::string& variable,
                                     int64_t offset, absl::Span<float> out,
                                     int64_t min_version, absl::Time deadline) {
  PullBatchRequest header;
  header.set_protocol_version(kProtocolVersion);
  header.set_min_version(min_version);
  PullRequest* part = header.add_parts();
  part->set_variable(variable);
  part->set_offset_elements(offset);
  part->set_num_elements(static_cast<int64_t>(out.size()));
  Notification done;
  absl::StatusOr<PullBatchResponse> result;
  shard.PullBatch(header, {out}, deadline,
                  [&](absl::StatusOr<PullBatchResponse> r) {
                    result = std::move(r);
                    done.Notify();
                  });
  done.WaitForNotification();
  if (!result.ok()) return result.status();
  if (result->versions_size() != 1) {
    return absl::InternalError("a one-part pull answered another count");
  }
  PullResponse response;
  response.set_version(result->versions(0));
  return response;
}

absl::StatusOr<PushResponse> PushOne(
    PsShard& shard, const std::string& variable, int64_t offset,
    std::shared_ptr<const std::vector<float>> gradient, absl::Time deadline,
    const PushOptions& options) {
  PushBatchRequest header;
  header.set_protocol_version(options.protocol);
  header.set_version(options.version);
  header.set_worker_index(options.worker);
  PushRequest* part = header.add_parts();
  part->set_variable(variable);
  part->set_offset_elements(offset);
  part->set_num_elements(options.num_elements >= 0
                             ? options.num_elements
                             : static_cast<int64_t>(gradient->size()));
  Notification done;
  absl::StatusOr<PushBatchResponse> result;
  const absl::Span<const float> data = *gradient;
  shard.PushBatch(header, {data}, std::move(gradient), deadline,
                  [&](absl::StatusOr<PushBatchResponse> r) {
                    result = std::move(r);
                    done.Notify();
                  });
  done.WaitForNotification();
  if (!result.ok()) return result.status();
  if (result->results_size() != 1) {
    return absl::InternalError("a one-part push answered another count");
  }
  const PushPartResult& outcome = result->results(0);
  if (outcome.code() != 0) {
    return absl::Status(static_cast<absl::StatusCode>(outcome.code()),
                        outcome.message());
  }
  PushResponse response;
  response.set_version(outcome.version());
  return response;
}

absl::StatusOr<PullRowsResponse> PullRowsOne(
    PsShard& shard, const std::string& table, const std::vector<int64_t>& ids,
    absl::Span<float> out, absl::Time deadline,
    const std::function<void(PullRowsRequest&)>& shape) {
  PullRowsRequest header;
  header.set_protocol_version(kProtocolVersion);
  header.set_train(true);
  RowsPart* part = header.add_parts();
  part->set_table(table);
  part->set_num_ids(static_cast<int64_t>(ids.size()));
  if (shape) shape(header);
  Notification done;
  absl::StatusOr<PullRowsResponse> result;
  shard.PullRows(header, {absl::MakeConstSpan(ids)}, {out}, deadline,
                 [&](absl::StatusOr<PullRowsResponse> r) {
                   result = std::move(r);
                   done.Notify();
                 });
  done.WaitForNotification();
  return result;
}

absl::StatusOr<PushRowsResponse> PushRowsOne(
    PsShard& shard, const std::string& table, std::vector<int64_t> ids,
    std::vector<float> gradients, absl::Time deadline,
    const std::function<void(PushRowsRequest&)>& shape) {
  PushRowsRequest header;
  header.set_protocol_version(kProtocolVersion);
  RowsPart* part = header.add_parts();
  part->set_table(table);
  part->set_num_ids(static_cast<int64_t>(ids.size()));
  if (shape) shape(header);
  auto owner =
      std::make_shared<std::pair<std::vector<int64_t>, std::vector<float>>>(
          std::move(ids), std::move(gradients));
  Notification done;
  absl::StatusOr<PushRowsResponse> result;
  shard.PushRows(header, {absl::MakeConstSpan(owner->first)},
                 {absl::MakeConstSpan(owner->second)}, owner, deadline,
                 [&](absl::StatusOr<PushRowsResponse> r) {
                   result = std::move(r);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (!result.ok()) return result.status();
  if (result->results_size() != 1) {
    return absl::InternalError("a one-part rows push answered another count");
  }
  const PushPartResult& outcome = result->results(0);
  if (outcome.code() != 0) {
    return absl::Status(static_cast<absl::StatusCode>(outcome.code()),
                        outcome.message());
  }
  return result;
}

absl::StatusOr<ConfigureResponse> FailingShard::Configure(
    const ConfigureRequest&, absl::Time) {
  ConfigureResponse response;
  response.set_chunk_elements(1 << 20);
  return response;
}

absl::StatusOr<StatsResponse> FailingShard::Stats(absl::Time) {
  ++stats_calls_;
  if (stats_answer_) return StatsResponse();
  return error_;
}

}  // namespace psflow::testing
