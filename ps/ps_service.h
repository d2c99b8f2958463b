// The parameter server's request semantics, written once for every
// transport: the gRPC adapter (ps/grpc_ps_server.h) and the in-process twin
// (client/local_ps_shard.h) only move bytes and call this.
//
//   Pull:   checks the batch (1 to kMaxBatchParts parts, each resolved to
//           exactly one chunk), then answers once every part reached
//           min_version and (BOUNDED) the slowest live worker is close
//           enough (ps/worker_clocks.h): at once, or on the thread whose
//           push completed the last awaited step, or when the caller
//           cancels it (its deadline). Values are either sent from the
//           variables in place (zero-copy; Hogwild semantics), copied as one
//           consistent snapshot per chunk, or copied into buffers the caller
//           gives (the in-process twin, shared memory), each under its chunk's
//           lock.
//   Push:   resolves every part first (BOUNDED: and the worker clock),
//           then the core checks every part
//           (sizes, NaN/Inf) before applying any; per-part outcomes (a stale
//           sync part is Aborted alone).
//   Assign: one chunk, overwritten.
//
// A single Pull or Push is a batch of one here; adapters convert the
// answer back for the single-call wire methods.
//
// Thread-safe. The core and the pool must outlive the service and every
// pull it answers.
#ifndef PSFLOW_PS_PS_SERVICE_H_
#define PSFLOW_PS_PS_SERVICE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/buffer_pool.h"
#include "common/mutex.h"
#include "proto/ps.pb.h"
#include "ps/ps_core.h"
#include "ps/worker_clocks.h"

namespace psflow {

// The ids that rows pulls waiting for a step may hold on one server, all
// together (each worker waits for one step at a time).
inline constexpr int64_t kMaxWaitingRowPullBytes = int64_t{256} << 20;

// Consistent-snapshot pulls copy their values into a buffer that lives
// until the answer is sent; a reader pulling faster than it receives would
// pile them up. Together they hold at most twice the server's dense
// variables (two whole-model snapshots in flight), and at least this much.
inline constexpr int64_t kMinSnapshotPullBudgetBytes = int64_t{512} << 20;

class PsService {
 public:
  // A pull's answer: one version per part and, unless the caller gave
  // buffers, the values to send (views into the variables, or into
  // `owner`'s snapshot, which must be kept until they are sent).
  struct PullAnswer {
    PullBatchResponse response;
    std::vector<absl::Span<const float>> values;
    std::shared_ptr<PooledBuffer> owner;
  };
  using PullDone = std::function<void(absl::StatusOr<PullAnswer>)>;

  // A pull that may still be waiting for its step.
  class PendingPull;

  // BOUNDED: the worker clock a pull waits for (no gate without clocks).
  struct Gate {
    WorkerClocks* clocks = nullptr;
    int worker = -1;
    int64_t clock = 0;
  };

  // `pool` is needed only by pulls that return values to send (no
  // buffers given); may be null otherwise.
  // Rows pulls that may wait hold at most `max_waiting_row_bytes` of ids
  // together.
  // Snapshot pulls' buffers hold at least `min_snapshot_bytes` together
  // (kMinSnapshotPullBudgetBytes).
  PsService(ParameterServerCore* core, BufferPool* pool,
            int64_t max_waiting_row_bytes = kMaxWaitingRowPullBytes,
            int64_t min_snapshot_bytes = kMinSnapshotPullBudgetBytes)
      : core_(core),
        pool_(pool),
        max_waiting_row_bytes_(max_waiting_row_bytes),
        min_snapshot_bytes_(min_snapshot_bytes) {}

  // Starts `request`. With `out` empty the answer carries the values to
  // send; otherwise `out` holds one buffer per part, exactly its size
  // (InvalidArgument otherwise), and the values are copied into it.
  // `done` runs exactly once: before Pull returns for an error or a pull
  // that need not wait, else later on another thread. The returned handle
  // cancels a waiting pull (its `done` gets DeadlineExceeded); null when
  // `done` already ran.
  std::shared_ptr<PendingPull> Pull(const PullBatchRequest& request,
                                    std::vector<absl::Span<float>> out,
                                    PullDone done);

  // The chunks a push batch names (batch size checked), for adapters that
  // must place the payload before pushing.
  absl::StatusOr<std::vector<ChunkRef>> ResolvePush(
      const PushBatchRequest& request) const;

  // Applies a batch whose parts ResolvePush gave as `refs`, `gradients[i]`
  // for refs[i] (see ParameterServerCore::PushBatch, also for `finite`).
  absl::StatusOr<PushBatchResponse> Push(
      const PushBatchRequest& request, absl::Span<const ChunkRef> refs,
      absl::Span<const absl::Span<const float>> gradients,
      ParameterServerCore::Finite finite =
          ParameterServerCore::Finite::kUnchecked);
  // Same, with gradients that may be read where they lie (ps/gradient.h).
  absl::StatusOr<PushBatchResponse> Push(const PushBatchRequest& request,
                                         absl::Span<const ChunkRef> refs,
                                         absl::Span<const Gradient> gradients,
                                         ParameterServerCore::Finite finite);

  // The chunk an assign names (to size its payload), and the assign.
  absl::StatusOr<ChunkRef> ResolveAssign(const AssignRequest& request) const;
  absl::Status Assign(const ChunkRef& ref, absl::Span<const float> values);

  // ---- Embedding tables (ps_service_rows.cc) ----

  // A rows pull's answer: one version per part and, unless the caller
  // gave buffers, every part's rows back to back in `rows`.
  struct RowsAnswer {
    PullRowsResponse response;
    std::shared_ptr<PooledBuffer> rows;
    int64_t num_floats = 0;
  };
  using RowsDone = std::function<void(absl::StatusOr<RowsAnswer>)>;
  class PendingRows;

  // Starts a PullRows whose parts' ids are `ids` (the caller keeps them
  // until `done`). With `out` empty the answer carries the rows; else one
  // buffer per part, exactly its size. SYNC: answers once every part's
  // table reached min_version; BOUNDED, with a worker clock: once the
  // bound allows the worker's step, as a dense pull. `done` runs exactly
  // once, as for Pull; the handle cancels a waiting pull (null when `done`
  // already ran).
  std::shared_ptr<PendingRows> PullRows(
      const PullRowsRequest& request,
      std::vector<absl::Span<const int64_t>> ids,
      std::vector<absl::Span<float>> out, RowsDone done);

  // The tables of a PushRows (to size its payload), and the push.
  absl::StatusOr<std::vector<EmbeddingTable*>> ResolvePushRows(
      const PushRowsRequest& request) const;
  absl::StatusOr<PushRowsResponse> PushRows(
      const PushRowsRequest& request, absl::Span<EmbeddingTable* const> tables,
      absl::Span<const absl::Span<const int64_t>> ids,
      absl::Span<const absl::Span<const float>> gradients);

  ParameterServerCore& core() { return *core_; }
  BufferPool& pool() { return *pool_; }

 private:
  // The answer of a pull whose parts reached their step: values copied
  // into `out` (when given), a snapshot, or views.
  // ResourceExhausted when a snapshot would pass the snapshot budget.
  absl::StatusOr<PullAnswer> Answer(absl::Span<const ChunkRef> refs,
                                    bool consistent_snapshot,
                                    absl::Span<const absl::Span<float>> out,
                                    const Gate& gate);
  // A buffer of `floats` for a snapshot, counted against the budget until
  // it is released; ResourceExhausted beyond it.
  absl::StatusOr<std::shared_ptr<PooledBuffer>> SnapshotBuffer(int64_t floats);

  ParameterServerCore* const core_;
  BufferPool* const pool_;
  const int64_t max_waiting_row_bytes_;
  // Bytes of ids held by rows pulls that may wait (PullRows).
  std::atomic<int64_t> waiting_row_bytes_{0};
  const int64_t min_snapshot_bytes_;
  // Bytes of snapshot buffers not yet released; shared with the buffers,
  // which may outlive the service (an answer still being sent).
  const std::shared_ptr<std::atomic<int64_t>> snapshot_bytes_ =
      std::make_shared<std::atomic<int64_t>>(0);
};

class PsService::PendingPull
    : public std::enable_shared_from_this<PendingPull> {
 public:
  // Answers DeadlineExceeded naming the awaited chunk, unless the pull
  // already answered or is answering now. Safe from any thread, any
  // number of times.
  void Cancel();

 private:
  friend class PsService;
  PendingPull(PsService* service, std::vector<ChunkRef> refs,
              int64_t min_version, bool consistent_snapshot, Gate gate,
              std::vector<absl::Span<float>> out, PullDone done)
      : service_(service),
        refs_(std::move(refs)),
        min_version_(min_version),
        consistent_snapshot_(consistent_snapshot),
        gate_(gate),
        out_(std::move(out)),
        done_(std::move(done)) {}

  // The wait on the gate, among the parts' waits.
  static constexpr size_t kClockWait = static_cast<size_t>(-1);

  // Registers a wait on every part below min_version, and on the gate;
  // answers now when nothing waits. Returns whether the pull is still
  // waiting.
  bool Start();
  // A part's version (or, for kClockWait, the gate) was reached.
  void OnVersionReached(size_t part);
  void Answer();

  PsService* const service_;
  const std::vector<ChunkRef> refs_;
  const int64_t min_version_;
  const bool consistent_snapshot_;
  const Gate gate_;
  const absl::Time created_ = absl::Now();
  const std::vector<absl::Span<float>> out_;
  PullDone done_;  // run once, by whoever claims the answer

  Mutex mu_;
  // Pending waits: (index into refs_ or kClockWait, the wait's id).
  std::vector<std::pair<size_t, uint64_t>> waits_ ABSL_GUARDED_BY(mu_);
  // Set by whichever of the last wait, Cancel or Start answers.
  bool answer_claimed_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

class PsService::PendingRows
    : public std::enable_shared_from_this<PendingRows> {
 public:
  // Answers DeadlineExceeded naming the awaited table, unless the pull
  // already answered. Safe from any thread, any number of times.
  void Cancel();

 private:
  friend class PsService;
  PendingRows(PsService* service, std::vector<EmbeddingTable*> tables,
              std::vector<absl::Span<const int64_t>> ids,
              std::vector<absl::Span<float>> out, bool train,
              int64_t min_version, Gate gate, RowsDone done)
      : service_(service),
        tables_(std::move(tables)),
        ids_(std::move(ids)),
        out_(std::move(out)),
        train_(train),
        min_version_(min_version),
        gate_(gate),
        done_(std::move(done)) {}

  // Registers a wait on every table below min_version, and (BOUNDED) on
  // the worker clocks; answers now when none waits. Returns whether the
  // pull is still waiting.
  bool Start();
  // A table reached min_version; nullptr: the bound allows the pull.
  void OnReached(EmbeddingTable* table);
  void Answer();

  PsService* const service_;
  const std::vector<EmbeddingTable*> tables_;
  const std::vector<absl::Span<const int64_t>> ids_;
  const std::vector<absl::Span<float>> out_;
  const bool train_;
  const int64_t min_version_;
  const Gate gate_;  // BOUNDED: the worker clock the pull waits for
  const absl::Time created_ = absl::Now();
  RowsDone done_;  // run once, by whoever claims the answer

  Mutex mu_;
  // Per table below min_version, and the clock wait (table nullptr).
  std::vector<std::pair<EmbeddingTable*, uint64_t>> waits_ ABSL_GUARDED_BY(mu_);
  bool answer_claimed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace psflow

#endif  // PSFLOW_PS_PS_SERVICE_H_
