#include "client/ps_client.h"

#include <algorithm>
#include <limits>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/mutex.h"
#include "common/status_macros.h"
#include "proto/protocol.h"

namespace psflow {

// Shared by the handle, every in-flight RPC and every send buffer's owner.
struct PsHandle::State {
  Mutex mu;
  int pending ABSL_GUARDED_BY(mu) = 1;  // the issuing thread holds one
  bool released ABSL_GUARDED_BY(mu) = false;
  absl::Status status ABSL_GUARDED_BY(mu);
  int64_t min_version ABSL_GUARDED_BY(mu) = std::numeric_limits<int64_t>::max();
  int64_t worker_clock ABSL_GUARDED_BY(mu) = -1;

  void Finish(const absl::Status& result, int64_t version, int64_t clock = -1) {
    MutexLock lock(&mu);
    if (!result.ok() && status.ok()) status = result;
    if (version >= 0) min_version = std::min(min_version, version);
    worker_clock = std::max(worker_clock, clock);
    --pending;
  }
};

namespace {

// Marks the handle's send buffers released when the transport drops the
// last reference to it.
struct ReleaseGuard {
  explicit ReleaseGuard(std::shared_ptr<PsHandle::State> s)
      : state(std::move(s)) {}
  ~ReleaseGuard() {
    MutexLock lock(&state->mu);
    state->released = true;
  }
  std::shared_ptr<PsHandle::State> state;
};

}  // namespace

PsHandle::~PsHandle() { (void)Wait(); }

absl::Status PsHandle::Wait() {
  MutexLock lock(&state_->mu);
  state_->mu.Await(Condition(
      +[](State* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return s->pending == 0 && s->released;
      },
      state_.get()));
  return state_->status;
}

int64_t PsHandle::min_version() const {
  MutexLock lock(&state_->mu);
  return state_->min_version == std::numeric_limits<int64_t>::max()
             ? -1
             : state_->min_version;
}

int64_t PsHandle::worker_clock() const {
  MutexLock lock(&state_->mu);
  return state_->worker_clock;
}

ParameterClient::ParameterClient(std::vector<std::unique_ptr<PsShard>> shards,
                                 Placement placement, const Options& options)
    : shards_(std::move(shards)),
      placement_(std::move(placement)),
      options_(options) {}

absl::Status ParameterClient::Configure(const ConfigureRequest& request,
                                        absl::Time until) {
  const absl::Time deadline =
      std::min(until, absl::Now() + options_.rpc_timeout);
  int64_t chunk = 0;
  for (const auto& shard : shards_) {
    absl::StatusOr<ConfigureResponse> response =
        shard->Configure(request, deadline);
    if (!response.ok()) return response.status();
    if (chunk != 0 && response->chunk_elements() != chunk) {
      return absl::FailedPreconditionError(absl::StrCat(
          shard->name(), " uses chunks of ", response->chunk_elements(),
          " elements but ", shards_[0]->name(), " uses ", chunk,
          "; start every ps_server with the same --chunk_bytes"));
    }
    chunk = response->chunk_elements();
  }
  chunk_elements_ = chunk;
  return absl::OkStatus();
}

absl::Status ParameterClient::CreateVariables() {
  std::vector<CreateVariablesRequest> requests(shards_.size());
  for (auto& request : requests) request.set_protocol_version(kProtocolVersion);
  for (const PlacedVariable& variable : placement_.variables) {
    for (const VariablePart& part : variable.parts) {
      VariableSpec* spec = requests[part.ps].add_variables();
      spec->set_name(part.name);
      for (int64_t d : part.shape) spec->add_shape(d);
      if (part.update == VariableUpdate::kMovingAverage) {
        spec->set_update(VariableSpec::MOVING_AVERAGE);
        spec->set_momentum(part.momentum);
      }
    }
  }
  const absl::Time deadline = absl::Now() + options_.rpc_timeout;
  for (size_t i = 0; i < shards_.size(); ++i) {
    absl::Status status = shards_[i]->CreateVariables(requests[i], deadline);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

std::shared_ptr<PsHandle> ParameterClient::Pull(
    const std::vector<Mutable>& variables, int64_t min_version,
    bool consistent_snapshot) {
  BatchOptions options;
  options.version = min_version;
  options.consistent_snapshot = consistent_snapshot;
  return Issue(Op::kPull, variables, options);
}

std::shared_ptr<PsHandle> ParameterClient::PullForStep(
    const std::vector<Mutable>& variables, const WorkerClock& clock) {
  BatchOptions options;
  options.pull_clock = clock;
  return Issue(Op::kPull, variables, options);
}

std::shared_ptr<PsHandle> ParameterClient::Push(
    const std::vector<Const>& gradients, int64_t version, int worker,
    std::optional<int64_t> worker_clock) {
  std::vector<Mutable> targets;
  targets.reserve(gradients.size());
  for (const auto& [name, data] : gradients) {
    // Pushes only read the buffer; Issue() takes one signature for all ops.
    targets.emplace_back(
        name, absl::MakeSpan(const_cast<float*>(data.data()), data.size()));
  }
  BatchOptions options;
  options.version = version;
  options.worker = worker;
  options.push_clock = worker_clock;
  return Issue(Op::kPush, targets, options);
}

std::shared_ptr<PsHandle> ParameterClient::PushThenPull(
    const std::vector<Const>& gradients, const std::vector<Mutable>& values,
    int64_t version, int worker) {
  BatchOptions options;
  options.version = version;
  options.worker = worker;
  return Issue(Op::kPushThenPull, values, options, &gradients);
}

std::shared_ptr<PsHandle> ParameterClient::Assign(
    const std::vector<Const>& values) {
  std::vector<Mutable> targets;
  targets.reserve(values.size());
  for (const auto& [name, data] : values) {
    targets.emplace_back(
        name, absl::MakeSpan(const_cast<float*>(data.data()), data.size()));
  }
  return Issue(Op::kAssign, targets, BatchOptions());
}

namespace {

// One variable's share of a run AllocateShared took from a server.
class SharedSlice final : public SharedBuffer {
 public:
  SharedSlice(std::shared_ptr<SharedBuffer> run, int64_t offset,
              int64_t elements)
      : run_(std::move(run)), offset_(offset), elements_(elements) {}
  absl::Span<float> span() override {
    return run_->span().subspan(offset_, elements_);
  }
  bool retired() const override { return run_->retired(); }

 private:
  const std::shared_ptr<SharedBuffer> run_;
  const int64_t offset_;
  const int64_t elements_;
};

}  // namespace

std::vector<std::shared_ptr<SharedBuffer>> ParameterClient::AllocateShared(
    const std::vector<std::string>& variables) {
  std::vector<std::shared_ptr<SharedBuffer>> buffers(variables.size());
  std::vector<int> server(variables.size(), -1);
  std::vector<int64_t> elements(variables.size(), 0);
  std::vector<int64_t> run(shards_.size(), 0);
  for (size_t i = 0; i < variables.size(); ++i) {
    const PlacedVariable* variable = placement_.Find(variables[i]);
    if (variable == nullptr || variable->parts.empty()) continue;
    const int ps = variable->parts[0].ps;
    bool one_server = true;
    for (const VariablePart& part : variable->parts) {
      one_server = one_server && part.ps == ps;
    }
    if (!one_server || ps < 0 || ps >= static_cast<int>(shards_.size())) {
      continue;
    }
    server[i] = ps;
    elements[i] = variable->num_elements;
    run[ps] += variable->num_elements;
  }
  for (int ps = 0; ps < static_cast<int>(shards_.size()); ++ps) {
    if (run[ps] == 0) continue;
    std::shared_ptr<SharedBuffer> memory = shards_[ps]->AllocateShared(run[ps]);
    if (memory == nullptr) continue;
    int64_t at = 0;
    for (size_t i = 0; i < variables.size(); ++i) {
      if (server[i] != ps) continue;
      buffers[i] = std::make_shared<SharedSlice>(memory, at, elements[i]);
      at += elements[i];
    }
  }
  return buffers;
}

std::shared_ptr<PsHandle> ParameterClient::Issue(
    Op op, const std::vector<Mutable>& targets, const BatchOptions& options,
    const std::vector<Const>* gradients) {
  auto state = std::make_shared<PsHandle::State>();
  auto handle = std::shared_ptr<PsHandle>(new PsHandle(state));
  auto guard = std::make_shared<ReleaseGuard>(state);
  const absl::Time deadline = absl::Now() + options_.rpc_timeout;

  auto fail = [&](absl::Status status) {
    state->Finish(status, -1);
    return handle;
  };
  if (chunk_elements_ == 0) {
    return fail(absl::FailedPreconditionError(
        "ParameterClient used before Configure(); configure it first"));
  }
  if (op == Op::kPushThenPull) {
    if (gradients == nullptr || gradients->size() != targets.size()) {
      return fail(absl::InvalidArgumentError(absl::StrCat(
          "a push and pull names ",
          gradients == nullptr ? 0 : gradients->size(), " gradients for ",
          targets.size(), " variables; name each once")));
    }
    for (size_t i = 0; i < targets.size(); ++i) {
      const auto& [name, gradient] = (*gradients)[i];
      if (name != targets[i].first ||
          gradient.size() != targets[i].second.size()) {
        return fail(absl::InvalidArgumentError(absl::StrCat(
            "a push and pull sends \"", name, "\" (", gradient.size(),
            " elements) where it reads \"", targets[i].first, "\" (",
            targets[i].second.size(), "); pass them in the same order")));
      }
    }
  }
  for (const auto& [name, buffer] : targets) {
    const PlacedVariable* variable = placement_.Find(name);
    if (variable == nullptr) {
      return fail(absl::NotFoundError(absl::StrCat(
          "variable \"", name, "\" is not in the placement (",
          placement_.variables.size(), " variables); check the model")));
    }
    if (static_cast<int64_t>(buffer.size()) != variable->num_elements) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("variable \"", name, "\" has ", variable->num_elements,
                       " elements but the buffer holds ", buffer.size())));
    }
  }
  // Every chunk-sized piece of every part of every variable, in order.
  std::vector<Piece> pieces;
  for (size_t t = 0; t < targets.size(); ++t) {
    const auto& [name, buffer] = targets[t];
    const PlacedVariable& variable = *placement_.Find(name);
    for (const VariablePart& part : variable.parts) {
      for (int64_t offset = 0; offset < part.num_elements;
           offset += chunk_elements_) {
        const int64_t n = std::min(chunk_elements_, part.num_elements - offset);
        const int64_t at = part.element_offset + offset;
        pieces.push_back(Piece{
            part.ps, &part.name, offset, buffer.subspan(at, n),
            gradients == nullptr ? absl::Span<const float>()
                                 : (*gradients)[t].second.subspan(at, n)});
      }
    }
  }
  // Pieces smaller than a chunk (biases, small layers, a large variable's
  // last piece) travel together: one RPC per server and up to a chunk of
  // them, instead of one RPC each. Batches are planned first and sent
  // after, so that each knows how many go to its server.
  std::vector<std::vector<const Piece*>> planned;
  std::vector<std::vector<const Piece*>> batches(shards_.size());
  std::vector<int64_t> batched(shards_.size(), 0);       // elements
  std::vector<int64_t> header_bytes(shards_.size(), 0);  // estimated
  auto flush = [&](int ps) {
    if (!batches[ps].empty()) planned.push_back(std::move(batches[ps]));
    batches[ps].clear();
    batched[ps] = 0;
    header_bytes[ps] = 0;
  };
  for (const Piece& piece : pieces) {
    const int64_t n = static_cast<int64_t>(piece.data.size());
    if (op == Op::kAssign) {
      IssueAssign(piece, deadline, state, guard);
      continue;
    }
    if (n >= chunk_elements_) {
      // A whole chunk: a batch of its own.
      planned.push_back({&piece});
      continue;
    }
    const int64_t part_bytes =
        static_cast<int64_t>(piece.part->size()) + kBatchPartOverheadBytes;
    if (batched[piece.ps] + n > chunk_elements_ ||
        static_cast<int>(batches[piece.ps].size()) == kMaxBatchParts ||
        header_bytes[piece.ps] + part_bytes > kMaxBatchHeaderBytes) {
      flush(piece.ps);
    }
    batches[piece.ps].push_back(&piece);
    batched[piece.ps] += n;
    header_bytes[piece.ps] += part_bytes;
  }
  for (int ps = 0; ps < static_cast<int>(shards_.size()); ++ps) flush(ps);
  std::vector<int> batches_per_server(shards_.size(), 0);
  for (const auto& batch : planned) ++batches_per_server[batch[0]->ps];
  for (const auto& batch : planned) {
    IssueBatch(op, batch, options, batches_per_server[batch[0]->ps], deadline,
               state, guard);
  }
  guard.reset();  // Released once the transport drops its references too.
  state->Finish(absl::OkStatus(), -1);
  return handle;
}

void ParameterClient::IssueAssign(const Piece& piece, absl::Time deadline,
                                  const std::shared_ptr<PsHandle::State>& state,
                                  const std::shared_ptr<const void>& guard) {
  {
    MutexLock lock(&state->mu);
    ++state->pending;
  }
  AssignRequest header;
  header.set_protocol_version(kProtocolVersion);
  header.set_variable(*piece.part);
  header.set_offset_elements(piece.offset);
  header.set_num_elements(static_cast<int64_t>(piece.data.size()));
  shards_[piece.ps]->Assign(header, piece.data, guard, deadline,
                            [state](absl::Status s) { state->Finish(s, -1); });
}

void ParameterClient::IssueBatch(Op op, const std::vector<const Piece*>& batch,
                                 const BatchOptions& options,
                                 int batches_to_server, absl::Time deadline,
                                 const std::shared_ptr<PsHandle::State>& state,
                                 const std::shared_ptr<const void>& guard) {
  PsShard& shard = *shards_[batch[0]->ps];
  {
    MutexLock lock(&state->mu);
    ++state->pending;
  }
  if (op == Op::kPull) {
    PullBatchRequest header;
    header.set_protocol_version(kProtocolVersion);
    header.set_min_version(options.version);
    header.set_consistent_snapshot(options.consistent_snapshot);
    if (options.pull_clock.has_value()) {
      *header.mutable_worker_clock() = *options.pull_clock;
    }
    std::vector<absl::Span<float>> out;
    for (const Piece* piece : batch) {
      PullRequest* part = header.add_parts();
      part->set_variable(*piece->part);
      part->set_offset_elements(piece->offset);
      part->set_num_elements(static_cast<int64_t>(piece->data.size()));
      out.push_back(piece->data);
    }
    shard.PullBatch(
        header, std::move(out), deadline,
        [state](absl::StatusOr<PullBatchResponse> r) {
          int64_t min = -1;
          if (r.ok() && !r->versions().empty()) {
            min = *std::min_element(r->versions().begin(), r->versions().end());
          }
          state->Finish(r.status(), min, r.ok() ? r->worker_clock() : -1);
        });
    return;
  }
  PushBatchRequest header;
  header.set_protocol_version(kProtocolVersion);
  header.set_version(options.version);
  header.set_worker_index(options.worker);
  if (options.push_clock.has_value()) {
    header.set_worker_clock(*options.push_clock);
    header.set_batches_in_step(batches_to_server);
  }
  std::vector<absl::Span<const float>> data;
  for (const Piece* piece : batch) {
    PushRequest* part = header.add_parts();
    part->set_variable(*piece->part);
    part->set_offset_elements(piece->offset);
    part->set_num_elements(static_cast<int64_t>(piece->data.size()));
    data.push_back(op == Op::kPushThenPull ? piece->gradient : piece->data);
  }
  if (op == Op::kPushThenPull) {
    PullBatchRequest* pull = header.mutable_then_pull();
    pull->set_protocol_version(kProtocolVersion);
    std::vector<absl::Span<float>> out;
    for (const Piece* piece : batch) {
      PullRequest* part = pull->add_parts();
      part->set_variable(*piece->part);
      part->set_offset_elements(piece->offset);
      part->set_num_elements(static_cast<int64_t>(piece->data.size()));
      out.push_back(piece->data);
    }
    shard.PushThenPull(header, std::move(data), guard, std::move(out), deadline,
                       [state](absl::StatusOr<PushBatchResponse> r) {
                         if (!r.ok()) return state->Finish(r.status(), -1);
                         // The shard answered only once the push was applied
                         // whole: the handle's version is the pulled values'.
                         const auto& versions = r->pulled().versions();
                         state->Finish(absl::OkStatus(),
                                       versions.empty()
                                           ? -1
                                           : *std::min_element(versions.begin(),
                                                               versions.end()));
                       });
    return;
  }
  shard.PushBatch(
      header, std::move(data), guard, deadline,
      [state](absl::StatusOr<PushBatchResponse> r) {
        if (!r.ok()) return state->Finish(r.status(), -1);
        // A part can fail alone only by being stale (sync mode): report
        // the first such part, like separate pushes would.
        absl::Status status;
        int64_t min = -1;
        for (const PushPartResult& part : r->results()) {
          if (part.code() != 0) {
            if (status.ok()) {
              status = absl::Status(static_cast<absl::StatusCode>(part.code()),
                                    part.message());
            }
          } else {
            min = min < 0 ? part.version() : std::min(min, part.version());
          }
        }
        state->Finish(status, min);
      });
}

absl::StatusOr<std::vector<StatsResponse>> ParameterClient::Stats(
    std::optional<absl::Duration> timeout) {
  const absl::Time deadline =
      absl::Now() + timeout.value_or(options_.rpc_timeout);
  std::vector<StatsResponse> all;
  for (const auto& shard : shards_) {
    absl::StatusOr<StatsResponse> stats = shard->Stats(deadline);
    if (!stats.ok()) return stats.status();
    all.push_back(*std::move(stats));
  }
  return all;
}

std::vector<absl::StatusOr<StatsResponse>> ParameterClient::StatsOfEach(
    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<absl::StatusOr<StatsResponse>> results(shards_.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < shards_.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = shards_[i]->Stats(deadline); });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

bool ParameterClient::AnyServerAnswers(absl::Duration timeout) {
  for (const absl::StatusOr<StatsResponse>& stats : StatsOfEach(timeout)) {
    if (stats.ok() || absl::IsCancelled(stats.status())) return true;
  }
  return false;
}

namespace {

// Runs call(i) for every server on threads of its own; the results in
// server order, or the first error.
template <typename Response, typename Call>
absl::StatusOr<std::vector<Response>> OnEveryServer(int n, Call call) {
  std::vector<absl::StatusOr<Response>> results(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&results, &call, i] { results[i] = call(i); });
  }
  for (std::thread& t : threads) t.join();
  std::vector<Response> responses;
  for (auto& r : results) {
    if (!r.ok()) return r.status();
    responses.push_back(*std::move(r));
  }
  return responses;
}

}  // namespace

absl::Status ParameterClient::ExcludeWorkers(const std::vector<int>& workers,
                                             absl::Duration timeout) {
  ExcludeWorkersRequest request;
  request.set_protocol_version(kProtocolVersion);
  for (int w : workers) request.add_workers(w);
  const absl::Time deadline = absl::Now() + timeout;
  return OnEveryServer<bool>(
             num_shards(),
             [&](int i) -> absl::StatusOr<bool> {
               RETURN_IF_ERROR(shards_[i]->ExcludeWorkers(request, deadline));
               return true;
             })
      .status();
}

absl::StatusOr<std::vector<HoldResponse>> ParameterClient::HoldAll(
    const HoldRequest& request) {
  const absl::Time deadline = absl::Now() + options_.rpc_timeout;
  return OnEveryServer<HoldResponse>(
      num_shards(), [&](int i) { return shards_[i]->Hold(request, deadline); });
}

absl::StatusOr<std::vector<SaveShardResponse>> ParameterClient::SaveShards(
    const std::vector<SaveShardRequest>& requests, absl::Duration timeout) {
  if (static_cast<int>(requests.size()) != num_shards()) {
    return absl::InvalidArgumentError("one SaveShard request per server");
  }
  const absl::Time deadline = absl::Now() + timeout;
  return OnEveryServer<SaveShardResponse>(num_shards(), [&](int i) {
    return shards_[i]->SaveShard(requests[i], deadline);
  });
}

absl::StatusOr<std::vector<RestoreShardResponse>>
ParameterClient::RestoreShards(const std::vector<RestoreShardRequest>& requests,
                               absl::Duration timeout) {
  if (static_cast<int>(requests.size()) != num_shards()) {
    return absl::InvalidArgumentError("one RestoreShard request per server");
  }
  const absl::Time deadline = absl::Now() + timeout;
  return OnEveryServer<RestoreShardResponse>(num_shards(), [&](int i) {
    return shards_[i]->RestoreShard(requests[i], deadline);
  });
}

absl::Status ParameterClient::ShutdownAll(const std::string& reason,
                                          absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<std::vector<bool>> stopped =
      OnEveryServer<bool>(num_shards(), [&](int i) -> absl::StatusOr<bool> {
        RETURN_IF_ERROR(shards_[i]->Shutdown(reason, deadline));
        return true;
      });
  return stopped.status();
}

absl::Status ParameterClient::Shutdown(int ps, const std::string& reason,
                                       absl::Duration timeout) {
  if (ps < 0 || ps >= num_shards()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no parameter server ", ps, " (the job has ", num_shards(), ")"));
  }
  return shards_[ps]->Shutdown(reason, absl::Now() + timeout);
}

void ParameterClient::CancelInFlight() {
  for (const auto& shard : shards_) shard->CancelInFlight();
}

void ParameterClient::Close() {
  for (const auto& shard : shards_) shard->Close();
}

}  // namespace psflow
