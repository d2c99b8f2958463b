#include "ps/ps_service.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace psflow {
namespace {

constexpr int64_t kMaxBatchElements = kMaxBulkMessageBytes / sizeof(float);

template <typename Part>
absl::StatusOr<std::vector<ChunkRef>> ResolveParts(
    const ParameterServerCore& core, uint32_t protocol_version,
    const google::protobuf::RepeatedPtrField<Part>& parts) {
  RETURN_IF_ERROR(ParameterServerCore::CheckBatchSize(parts.size()));
  std::vector<ChunkRef> refs;
  refs.reserve(parts.size());
  absl::flat_hash_set<std::pair<const Variable*, int>> chunks;
  chunks.reserve(parts.size());
  int64_t total = 0;
  for (const Part& part : parts) {
    ASSIGN_OR_RETURN(ChunkRef ref,
                     core.Resolve(protocol_version, part.variable(),
                                  part.offset_elements(), part.num_elements()));
    // Each chunk once: a repeat would be dropped as the same worker's
    // second gradient in SYNC mode, and would size buffers by repetition.
    if (!chunks.emplace(ref.variable, ref.chunk).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a batch names variable \"", part.variable().substr(0, 256),
          "\" at offset ", part.offset_elements(),
          " twice; name each chunk at most once per batch"));
    }
    // Buffers are sized by the batch: at most what one message carries.
    total += ref.num_elements;
    if (total > kMaxBatchElements) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a batch names more than ", kMaxBatchElements, " floats (",
          kMaxBulkMessageBytes,
          " bytes, the most one message carries); send fewer parts"));
    }
    refs.push_back(ref);
  }
  return refs;
}

}  // namespace

std::shared_ptr<PsService::PendingPull> PsService::Pull(
    const PullBatchRequest& request, std::vector<absl::Span<float>> out,
    PullDone done) {
  absl::StatusOr<std::vector<ChunkRef>> refs =
      ResolveParts(*core_, request.protocol_version(), request.parts());
  if (!refs.ok()) {
    done(refs.status());
    return nullptr;
  }
  if (!out.empty()) {
    if (out.size() != refs->size()) {
      done(absl::InvalidArgumentError(absl::StrCat(
          "pull of ", refs->size(), " parts into ", out.size(), " buffers")));
      return nullptr;
    }
    for (size_t i = 0; i < out.size(); ++i) {
      if (static_cast<int64_t>(out[i].size()) != (*refs)[i].num_elements) {
        done(absl::InvalidArgumentError(absl::StrCat(
            "pull buffer for \"", request.parts(i).variable(), "\" holds ",
            out[i].size(), " values; the part has ", (*refs)[i].num_elements)));
        return nullptr;
      }
    }
  }
  // BOUNDED: a worker's pull waits for the slowest live worker.
  Gate gate;
  if (request.has_worker_clock()) {
    gate.clocks = core_->worker_clocks();  // null in other modes: no gate
    if (gate.clocks != nullptr) {
      const WorkerClock& wc = request.worker_clock();
      if (absl::Status ok = gate.clocks->Check(wc.worker_index(), wc.clock());
          !ok.ok()) {
        done(ok);
        return nullptr;
      }
      gate.worker = wc.worker_index();
      gate.clock =
          wc.join() ? gate.clocks->Join(gate.worker, wc.clock()) : wc.clock();
    }
  }
  // Every chunk is at step 0 or later: an async pull never waits, and is
  // answered here without the bookkeeping of a wait (the hot path).
  if (request.min_version() <= 0 &&
      (gate.clocks == nullptr || gate.clocks->Allows(gate.clock))) {
    done(Answer(*refs, request.consistent_snapshot(), out, gate));
    return nullptr;
  }
  std::shared_ptr<PendingPull> pull(new PendingPull(
      this, *std::move(refs), request.min_version(),
      request.consistent_snapshot(), gate, std::move(out), std::move(done)));
  return pull->Start() ? pull : nullptr;
}

bool PsService::PendingPull::Start() {
  {
    MutexLock lock(&mu_);
    for (size_t i = 0; i < refs_.size() && !cancelled_; ++i) {
      // The callback blocks on mu_ until this loop is done. It holds the
      // pull alive until it runs or is cancelled.
      std::optional<uint64_t> id = refs_[i].variable->WhenVersionReached(
          refs_[i].chunk, min_version_,
          [self = shared_from_this(), i] { self->OnVersionReached(i); });
      if (id.has_value()) waits_.emplace_back(i, *id);
    }
    if (gate_.clocks != nullptr && !cancelled_) {
      std::optional<uint64_t> id =
          gate_.clocks->WhenAllowed(gate_.clock, [self = shared_from_this()] {
            self->gate_.clocks->CountWait(absl::Now() - self->created_);
            self->OnVersionReached(kClockWait);
          });
      if (id.has_value()) waits_.emplace_back(kClockWait, *id);
    }
    if (!waits_.empty()) return true;
    answer_claimed_ = true;
  }
  Answer();
  return false;
}

void PsService::PendingPull::OnVersionReached(size_t part) {
  {
    MutexLock lock(&mu_);
    auto it = std::find_if(waits_.begin(), waits_.end(),
                           [part](const auto& w) { return w.first == part; });
    if (it != waits_.end()) waits_.erase(it);
    if (!waits_.empty() || answer_claimed_) return;
    answer_claimed_ = true;
  }
  Answer();
}

void PsService::PendingPull::Cancel() {
  std::string waiting_for;
  {
    MutexLock lock(&mu_);
    cancelled_ = true;
    if (answer_claimed_) return;
    for (auto it = waits_.begin(); it != waits_.end();) {
      bool cancelled;
      if (it->first == kClockWait) {
        waiting_for = absl::StrCat(
            "waiting for a slower worker: ",
            gate_.clocks->DescribeWait(gate_.worker, gate_.clock),
            " (bounded staleness; the chief drops a lost worker from the "
            "bound after its heartbeat timeout)");
        cancelled = gate_.clocks->Cancel(it->second);
        if (cancelled) gate_.clocks->CountWait(absl::Now() - created_);
      } else {
        const ChunkRef& ref = refs_[it->first];
        if (waiting_for.empty()) {
          waiting_for =
              absl::StrCat("waiting for step ", min_version_, " of \"",
                           ref.variable->name(), "\" chunk ", ref.chunk,
                           " (at step ", ref.variable->Version(ref.chunk), ")");
        }
        cancelled = ref.variable->CancelWait(ref.chunk, it->second);
      }
      // A wait that cannot be cancelled is firing now; its callback
      // removes itself and, if last, answers.
      it = cancelled ? waits_.erase(it) : std::next(it);
    }
    if (!waits_.empty()) return;
    answer_claimed_ = true;
  }
  PullDone done = std::move(done_);
  done(absl::DeadlineExceededError(
      absl::StrCat("pull was cancelled while ", waiting_for)));
}

void PsService::PendingPull::Answer() {
  PullDone done = std::move(done_);
  done(service_->Answer(refs_, consistent_snapshot_, out_, gate_));
}

absl::StatusOr<PsService::PullAnswer> PsService::Answer(
    absl::Span<const ChunkRef> refs, bool consistent_snapshot,
    absl::Span<const absl::Span<float>> out, const Gate& gate) {
  PullAnswer answer;
  if (gate.clocks != nullptr) answer.response.set_worker_clock(gate.clock);
  if (!out.empty()) {
    for (size_t i = 0; i < refs.size(); ++i) {
      answer.response.add_versions(core_->Pull(refs[i], out[i]).version());
    }
  } else if (consistent_snapshot) {
    int64_t total = 0;
    for (const ChunkRef& ref : refs) total += ref.num_elements;
    ASSIGN_OR_RETURN(answer.owner, SnapshotBuffer(total));
    int64_t offset = 0;
    for (const ChunkRef& ref : refs) {
      absl::Span<float> values =
          answer.owner->span().subspan(offset, ref.num_elements);
      answer.response.add_versions(core_->Pull(ref, values).version());
      answer.values.push_back(values);
      offset += ref.num_elements;
    }
  } else {
    // Zero-copy: the values stay in the variables, which live as long as
    // the core.
    for (const ChunkRef& ref : refs) {
      PullView view = core_->View(ref);
      answer.response.add_versions(view.response.version());
      answer.values.push_back(view.values);
    }
  }
  return answer;
}

namespace {

// Owns a snapshot's pooled buffer and gives its bytes back to the budget.
class CountedBuffer {
 public:
  CountedBuffer(std::shared_ptr<PooledBuffer> buffer,
                std::shared_ptr<std::atomic<int64_t>> counter, int64_t bytes)
      : buffer_(std::move(buffer)),
        counter_(std::move(counter)),
        bytes_(bytes) {}
  ~CountedBuffer() { counter_->fetch_sub(bytes_); }
  CountedBuffer(const CountedBuffer&) = delete;
  CountedBuffer& operator=(const CountedBuffer&) = delete;
  PooledBuffer* get() const { return buffer_.get(); }

 private:
  const std::shared_ptr<PooledBuffer> buffer_;
  const std::shared_ptr<std::atomic<int64_t>> counter_;
  const int64_t bytes_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<PooledBuffer>> PsService::SnapshotBuffer(
    int64_t floats) {
  const int64_t bytes = floats * static_cast<int64_t>(sizeof(float));
  const int64_t budget = std::max<int64_t>(
      min_snapshot_bytes_,
      2 * core_->dense_elements() * static_cast<int64_t>(sizeof(float)));
  const int64_t before = snapshot_bytes_->fetch_add(bytes);
  // One alone always fits: a pull names each chunk at most once.
  if (before > 0 && before + bytes > budget) {
    snapshot_bytes_->fetch_sub(bytes);
    return absl::ResourceExhaustedError(
        absl::StrCat("consistent-snapshot pulls holding ", before,
                     " bytes are still being sent; this one (", bytes,
                     " bytes) would pass the server's budget for them (",
                     budget, " bytes: twice its dense variables, at least ",
                     min_snapshot_bytes_, "); retry once they are received"));
  }
  auto counted = std::make_shared<CountedBuffer>(pool_->Acquire(floats),
                                                 snapshot_bytes_, bytes);
  PooledBuffer* raw = counted->get();
  return std::shared_ptr<PooledBuffer>(std::move(counted), raw);
}

absl::StatusOr<std::vector<ChunkRef>> PsService::ResolvePush(
    const PushBatchRequest& request) const {
  return ResolveParts(*core_, request.protocol_version(), request.parts());
}

absl::StatusOr<PushBatchResponse> PsService::Push(
    const PushBatchRequest& request, absl::Span<const ChunkRef> refs,
    absl::Span<const absl::Span<const float>> gradients,
    ParameterServerCore::Finite finite) {
  const std::vector<Gradient> views(gradients.begin(), gradients.end());
  return Push(request, refs, views, finite);
}

absl::StatusOr<PushBatchResponse> PsService::Push(
    const PushBatchRequest& request, absl::Span<const ChunkRef> refs,
    absl::Span<const Gradient> gradients, ParameterServerCore::Finite finite) {
  // BOUNDED: a worker's push carries its step (batches_in_step > 0); its
  // clock is checked before anything is applied and advanced after.
  RETURN_IF_ERROR(core_->CheckWorkerIndex(request.worker_index()));
  WorkerClocks* clocks =
      request.batches_in_step() > 0 ? core_->worker_clocks() : nullptr;
  if (clocks != nullptr) {
    RETURN_IF_ERROR(
        clocks->Check(request.worker_index(), request.worker_clock()));
    if (request.batches_in_step() > WorkerClocks::kMaxBatchesInStep) {
      return absl::InvalidArgumentError(
          absl::StrCat("batches_in_step is ", request.batches_in_step(),
                       "; at most ", WorkerClocks::kMaxBatchesInStep));
    }
  }
  absl::StatusOr<PushBatchResponse> response = core_->PushBatch(
      refs, request.version(), request.worker_index(), gradients, finite);
  // A gradient refused for its values (not finite, a wrong size) still
  // ends the worker's step: the step is taken, its update dropped. Left
  // uncounted, the step would hold back every pull that waits for this
  // worker's clock, while the worker itself waits on its next pull (a
  // diverging bounded job stalled for the whole RPC deadline).
  if (clocks != nullptr &&
      (response.ok() || absl::IsInvalidArgument(response.status()))) {
    clocks->OnPushApplied(request.worker_index(), request.worker_clock(),
                          request.batches_in_step());
  }
  return response;
}

absl::StatusOr<ChunkRef> PsService::ResolveAssign(
    const AssignRequest& request) const {
  return core_->Resolve(request.protocol_version(), request.variable(),
                        request.offset_elements(), request.num_elements());
}

absl::Status PsService::Assign(const ChunkRef& ref,
                               absl::Span<const float> values) {
  return core_->Assign(ref, values);
}

}  // namespace psflow
