#include "client/local_ps_shard.h"

#include <thread>
#include <utility>

#include "common/status_macros.h"
#include "ps/shard_checkpoint.h"

namespace psflow {

LocalPsShard::LocalPsShard(ParameterServerCore* core, std::string name)
    : core_(core), name_(std::move(name)) {}

LocalPsShard::~LocalPsShard() {
  // Pulls waiting for a version run on their own threads; let them finish
  // (each is bounded by its deadline) before the shard goes away.
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* waiting) { return *waiting == 0; }, &waiting_pulls_));
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
  absl::MutexLock lock(&mu_);
  shutdown_requested_ = true;
  return absl::OkStatus();
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
  absl::MutexLock lock(&mu_);
  return shutdown_requested_;
}

void LocalPsShard::Pull(
    const PullRequest& header, absl::Span<float> out, absl::Time deadline,
    std::function<void(absl::StatusOr<PullResponse>)> done) {
  absl::StatusOr<ChunkRef> ref =
      core_->Resolve(header.protocol_version(), header.variable(),
                     header.offset_elements(), header.num_elements());
  if (!ref.ok()) return done(ref.status());
  if (static_cast<int64_t>(out.size()) != ref->num_elements) {
    return done(absl::InvalidArgumentError("pull buffer size mismatch"));
  }
  if (ref->variable->Version(ref->chunk) >= header.min_version()) {
    return done(core_->Pull(*ref, out));
  }
  // Waiting must not block the caller: wait on a thread of its own.
  {
    absl::MutexLock lock(&mu_);
    ++waiting_pulls_;
  }
  std::thread([this, ref = *ref, min = header.min_version(), deadline, out,
               done = std::move(done)] {
    done(core_->PullBlocking(ref, min, deadline, out));
    absl::MutexLock lock(&mu_);
    --waiting_pulls_;
  }).detach();
}

void LocalPsShard::Push(
    const PushRequest& header, absl::Span<const float> data,
    std::shared_ptr<const void>, absl::Time,
    std::function<void(absl::StatusOr<PushResponse>)> done) {
  absl::StatusOr<ChunkRef> ref =
      core_->Resolve(header.protocol_version(), header.variable(),
                     header.offset_elements(), header.num_elements());
  if (!ref.ok()) return done(ref.status());
  done(core_->Push(*ref, header, data));
}

namespace {

// A batch's chunks, checked like the gRPC server checks them.
template <typename Part>
absl::StatusOr<std::vector<ChunkRef>> ResolveParts(
    const ParameterServerCore& core, uint32_t protocol_version,
    const google::protobuf::RepeatedPtrField<Part>& parts) {
  RETURN_IF_ERROR(ParameterServerCore::CheckBatchSize(parts.size()));
  std::vector<ChunkRef> refs;
  for (const auto& part : parts) {
    ASSIGN_OR_RETURN(ChunkRef ref,
                     core.Resolve(protocol_version, part.variable(),
                                  part.offset_elements(), part.num_elements()));
    refs.push_back(ref);
  }
  return refs;
}

}  // namespace

void LocalPsShard::PullBatch(
    const PullBatchRequest& header, std::vector<absl::Span<float>> out,
    absl::Time deadline,
    std::function<void(absl::StatusOr<PullBatchResponse>)> done) {
  absl::StatusOr<std::vector<ChunkRef>> refs =
      ResolveParts(*core_, header.protocol_version(), header.parts());
  if (!refs.ok()) return done(refs.status());
  if (out.size() != refs->size()) {
    return done(absl::InvalidArgumentError("pull batch buffer count mismatch"));
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (static_cast<int64_t>(out[i].size()) != (*refs)[i].num_elements) {
      return done(absl::InvalidArgumentError("pull buffer size mismatch"));
    }
  }
  auto pull_all = [this, refs = *refs, out, min = header.min_version(),
                   deadline]() -> absl::StatusOr<PullBatchResponse> {
    PullBatchResponse response;
    for (size_t i = 0; i < refs.size(); ++i) {
      ASSIGN_OR_RETURN(PullResponse part,
                       core_->PullBlocking(refs[i], min, deadline, out[i]));
      response.add_versions(part.version());
    }
    return response;
  };
  bool ready = true;
  for (const ChunkRef& ref : *refs) {
    ready = ready && ref.variable->Version(ref.chunk) >= header.min_version();
  }
  if (ready) return done(pull_all());
  // Waiting must not block the caller: wait on a thread of its own.
  {
    absl::MutexLock lock(&mu_);
    ++waiting_pulls_;
  }
  std::thread([this, pull_all = std::move(pull_all), done = std::move(done)] {
    done(pull_all());
    absl::MutexLock lock(&mu_);
    --waiting_pulls_;
  }).detach();
}

void LocalPsShard::PushBatch(
    const PushBatchRequest& header, std::vector<absl::Span<const float>> data,
    std::shared_ptr<const void>, absl::Time,
    std::function<void(absl::StatusOr<PushBatchResponse>)> done) {
  absl::StatusOr<std::vector<ChunkRef>> refs =
      ResolveParts(*core_, header.protocol_version(), header.parts());
  if (!refs.ok()) return done(refs.status());
  done(core_->PushBatch(*refs, header.version(), header.worker_index(), data));
}

void LocalPsShard::Assign(const AssignRequest& header,
                          absl::Span<const float> data,
                          std::shared_ptr<const void>, absl::Time,
                          std::function<void(absl::Status)> done) {
  absl::StatusOr<ChunkRef> ref =
      core_->Resolve(header.protocol_version(), header.variable(),
                     header.offset_elements(), header.num_elements());
  if (!ref.ok()) return done(ref.status());
  done(core_->Assign(*ref, data));
}

}  // namespace psflow
