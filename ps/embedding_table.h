// One sparse embedding table held by a parameter server: float32 rows of a
// fixed dimension keyed by int64 ids, with no vocabulary declared. A row is
// created on first use from (seed, id) alone (ps/row_initializer.h) and
// carries its optimizer slots, its own update count (so Adam is lazy: a row
// is corrected for the updates it received, not the table's) and the step
// it was last used at.
//
// Each server holds the rows whose ids hash to it (common/job/
// row_placement.h). Inside, rows are spread over kStripes stripes by the
// same hash, each with its own lock, index (ps/row_index.h) and storage in
// fixed blocks, so pulls and pushes of different rows run in parallel and
// the table grows without ever copying its rows.
//
// Policies, all optional:
//   admission: an id gets a trainable row only once its gradients were
//     pushed min_frequency times (counted in fixed memory, ps/
//     admission_sketch.h); until then a lookup answers the initializer's
//     row (or zeros) and gradients are only counted.
//   age eviction: rows not pulled or pushed for evict_after_steps of the
//     table's steps are removed (a sweep every evict_after_steps / 4).
//   capacity: at most max_rows rows; a stripe at its share of the cap
//     first removes its least recently used 1/32 (by last step).
// An evicted id that returns starts again from its initializer row.
//
// Versions: the table's version counts its updates, like a dense chunk's:
// ASYNC one per push, SYNC one per aggregated step (the mean of
// replicas_to_aggregate workers' gradients, a row absent from a worker's
// push counting as a zero gradient, as in data-parallel training). The
// learning rate follows the schedule at that version.
//
// Thread-safe. Callbacks registered with WhenVersionReached() run on the
// thread that advanced the version, after the table's locks are released.
#ifndef PSFLOW_PS_EMBEDDING_TABLE_H_
#define PSFLOW_PS_EMBEDDING_TABLE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/mutex.h"
#include "ps/admission_sketch.h"
#include "ps/optimizer.h"
#include "ps/row_index.h"
#include "ps/row_initializer.h"
#include "ps/variable.h"

namespace psflow {

struct EmbeddingTableOptions {
  std::string name;
  int dim = 0;
  RowInitializer initializer;
  // Admission: pushes an id needs before it gets a row; <= 1 admits every
  // id on first use.
  int64_t min_frequency = 0;
  // What a training lookup of an id without a row answers: zeros, or
  // (false) the initializer's row. Evaluation lookups answer zeros.
  bool unadmitted_zeros = false;
  // Counters of the admission sketch over all stripes (memory: 8 bytes
  // each); used only with min_frequency > 1.
  int64_t admission_counters = 1 << 20;
  // Age eviction: 0 never.
  int64_t evict_after_steps = 0;
  // Capacity: 0 unbounded.
  int64_t max_rows = 0;
};

// Counters since the table was created (or restored).
struct EmbeddingTableStats {
  int64_t rows = 0;
  int64_t bytes = 0;  // rows, slots, metadata, index and sketch
  int64_t version = 0;
  int64_t rows_pulled = 0;
  int64_t rows_pushed = 0;
  int64_t admissions = 0;  // rows created
  int64_t evicted_by_age = 0;
  int64_t evicted_by_capacity = 0;
  // Lookups answered without a row, and gradients only counted, because
  // the id was not admitted yet.
  int64_t unadmitted_lookups = 0;
  int64_t unadmitted_gradients = 0;
  // SYNC: pushes dropped because they were for an older version.
  int64_t stale_pushes_dropped = 0;
};

// One row as saved in or restored from a checkpoint.
struct SavedRow {
  int64_t id = 0;
  int64_t updates = 0;    // the row's own update count
  int64_t last_step = 0;  // the table version it was last used at
  // dim values, then dim floats per optimizer slot.
  absl::Span<const float> data;
};

class EmbeddingTable {
 public:
  static constexpr int kStripes = 64;

  // `optimizer` (the table's own, or the server's) and everything in
  // `rule` must outlive the table. Options are checked by the caller
  // (ValidateEmbeddingTableOptions).
  EmbeddingTable(EmbeddingTableOptions options, const Optimizer* optimizer,
                 const UpdateRule& rule);
  EmbeddingTable(const EmbeddingTable&) = delete;
  EmbeddingTable& operator=(const EmbeddingTable&) = delete;
  ~EmbeddingTable();

  const std::string& name() const { return options_.name; }
  int dim() const { return options_.dim; }
  const EmbeddingTableOptions& options() const { return options_; }
  const std::vector<std::string>& slot_names() const;
  // The value slot `slot` of a new row starts at.
  float slot_initial_value(int slot) const { return slot_initial_[slot]; }
  // Floats per stored row: the values and every slot.
  int row_floats() const { return row_floats_; }
  // Approximate bytes one row costs (for budgets and reports).
  int64_t bytes_per_row() const;
  // The row-memory budget this table shares with the server's other
  // tables (SetMemoryBudget), in bytes; 0: none.
  int64_t memory_budget_limit() const { return budget_limit_; }

  // Writes the rows of `ids` into `out` (ids.size() x dim). A `train` pull
  // creates the rows of admitted ids that have none and marks every row
  // used now; otherwise (evaluation, export) nothing changes and an id
  // without a row reads as zeros, the table's default row (as an exported
  // ONNX model reads it). A train pull of an id that is not admitted
  // reads zeros or its initializer's row (unadmitted_zeros). Returns the
  // version the
  // rows were read at. ResourceExhausted, naming the table, when creating
  // rows would pass the server's memory budget.
  absl::StatusOr<int64_t> Pull(absl::Span<const int64_t> ids, bool train,
                               absl::Span<float> out);

  // Pushes one gradient row per id (gradients: ids.size() x dim, finite:
  // the caller checked). ASYNC applies each row now (an id listed twice
  // is updated twice). SYNC adds the rows to step `version`'s aggregate;
  // a push for an older version is Aborted (stale, counted), for a newer
  // one InvalidArgument, a second push of `worker` for the same step a
  // duplicate. Returns the outcome and the version after the push.
  absl::StatusOr<std::pair<PushOutcome, int64_t>> Push(
      absl::Span<const int64_t> ids, absl::Span<const float> gradients,
      int64_t version, int worker);

  int64_t Version() const;
  EmbeddingTableStats Stats() const;

  // SYNC: no update may take the table beyond version `limit` (a
  // checkpoint's hold); Variable::kNoHold lifts it.
  void SetHoldLimit(int64_t limit);

  // When the version is below `min_version`, arranges for `ready` to run
  // once it gets there and returns an id for CancelWait(); nullopt (never
  // calling `ready`) when it is already there.
  std::optional<uint64_t> WhenVersionReached(int64_t min_version,
                                             std::function<void()> ready);
  bool CancelWait(uint64_t id);

  // Calls `visit` for every row of stripe `stripe` under that stripe's
  // lock (a consistent copy of each row). Returns the table's version
  // before the visit. In SYNC mode a checkpoint holds the table first, so
  // no step applies meanwhile.
  int64_t VisitStripe(int stripe,
                      const std::function<void(const SavedRow&)>& visit) const;

  // Replaces the table's contents with restored rows: Clear(), then
  // AddRestoredRow() per row, then SetRestoredVersion().
  void Clear();
  // InvalidArgument when row.data is not row_floats() long.
  absl::Status AddRestoredRow(const SavedRow& row);
  void SetRestoredVersion(int64_t version);

  // A row-memory budget shared by every table of a server (bytes); null:
  // unbounded. Set before any row is created.
  void SetMemoryBudget(std::atomic<int64_t>* used, int64_t limit);

 private:
  // Row blocks start on a cache line (kRowAlignment bytes), so a row whose
  // size is a multiple of it (dimension 16 and one slot: 128 bytes) spans
  // no more lines than it must: fewer misses per row looked up.
  static constexpr size_t kRowAlignment = 64;
  struct AlignedDelete {
    void operator()(float* p) const {
      ::operator delete[](p, std::align_val_t(kRowAlignment));
    }
  };
  using RowBlock = std::unique_ptr<float[], AlignedDelete>;
  // A share of the rows with its own lock; rows live in blocks of
  // kBlockRows (never moved), each with two int64 of metadata: its update
  // count and the version it was last used at.
  struct Stripe {
    mutable Mutex mu;
    RowIndex index ABSL_GUARDED_BY(mu);
    std::vector<RowBlock> blocks ABSL_GUARDED_BY(mu);
    std::vector<std::unique_ptr<int64_t[]>> meta ABSL_GUARDED_BY(mu);
    std::vector<uint32_t> free_rows ABSL_GUARDED_BY(mu);
    uint32_t next_row ABSL_GUARDED_BY(mu) = 0;
    // min_frequency > 1 only.
    std::unique_ptr<AdmissionSketch> sketch ABSL_GUARDED_BY(mu);
  };
  struct Waiter {
    uint64_t id;
    int64_t min_version;
    std::function<void()> ready;
  };

  static int StripeOf(int64_t id);
  // Pulls and pushes look a stripe's rows up kLookupChunk ids at a time,
  // the index slots of the next chunk and the rows found prefetched, so
  // that the cache misses of a chunk overlap instead of queuing one after
  // the other (a table much larger than the cache misses on nearly every
  // id). The chunk for this table: 1 when its stripes are capped.
  static constexpr uint32_t kLookupChunk = 16;
  uint32_t LookupChunk() const;
  // Prefetches the index slots of ids[order[from..to)].
  static void PrefetchIndex(const Stripe& s, absl::Span<const int64_t> ids,
                            const std::vector<uint32_t>& order, uint32_t from,
                            uint32_t to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // Prefetches `row` (its values, or all its floats) and its metadata;
  // nothing for kNone.
  void PrefetchRowLocked(const Stripe& s, uint32_t row, bool values_only) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // The row of `id` in `s`, created (admitted) if `create` and missing.
  // kNone when absent and not created; error when the budget is spent.
  absl::StatusOr<uint32_t> FindOrCreateLocked(Stripe& s, int64_t id,
                                              bool create, int64_t step)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  uint32_t AllocateRowLocked(Stripe& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  void FreeRowLocked(Stripe& s, int64_t id, uint32_t row)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  void EvictLeastRecentlyUsedLocked(Stripe& s)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  void MaybeSweepByAge(int64_t version);
  // Applies `gradients` (rows for `ids`) at update `step` (the table's
  // version before it), lr scaled by `lr_scale`.
  absl::Status ApplyRows(absl::Span<const int64_t> ids,
                         absl::Span<const float> gradients, int64_t step,
                         double lr_scale, bool count_admission);
  // Groups positions of `ids` by stripe (counting sort).
  static void GroupByStripe(absl::Span<const int64_t> ids,
                            std::vector<uint32_t>& order,
                            std::vector<uint32_t>& stripe_begin);
  absl::StatusOr<std::pair<PushOutcome, int64_t>> PushSync(
      absl::Span<const int64_t> ids, absl::Span<const float> gradients,
      int64_t version, int worker);
  // SYNC: applies a complete aggregate unless a hold keeps it; returns
  // the waiters to run.
  std::vector<std::function<void()>> ApplyAggregateLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(sync_mu_);
  std::vector<std::function<void()>> AdvanceLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(sync_mu_);

  const EmbeddingTableOptions options_;
  const Optimizer* const optimizer_;
  const UpdateRule rule_;
  const int row_floats_;
  const int64_t stripe_cap_;         // rows per stripe; 0 unbounded
  std::vector<float> slot_initial_;  // per slot
  std::unique_ptr<Stripe[]> stripes_;

  std::atomic<int64_t>* budget_used_ = nullptr;
  int64_t budget_limit_ = 0;

  // ASYNC: the version (SYNC keeps it under sync_mu_ too, mirrored here
  // for lock-free reads).
  std::atomic<int64_t> version_{0};
  std::atomic<int64_t> next_age_sweep_{0};

  // SYNC aggregation and every mode's version waiters.
  mutable Mutex sync_mu_;
  std::unordered_map<int64_t, uint32_t> aggregate_rows_
      ABSL_GUARDED_BY(sync_mu_);  // id -> index into aggregate_
  std::vector<int64_t> aggregate_ids_ ABSL_GUARDED_BY(sync_mu_);
  std::vector<float> aggregate_ ABSL_GUARDED_BY(sync_mu_);
  std::set<int> contributors_ ABSL_GUARDED_BY(sync_mu_);
  int64_t hold_limit_ ABSL_GUARDED_BY(sync_mu_) = Variable::kNoHold;
  bool aggregate_held_ ABSL_GUARDED_BY(sync_mu_) = false;
  std::vector<Waiter> waiters_ ABSL_GUARDED_BY(sync_mu_);
  uint64_t next_waiter_id_ ABSL_GUARDED_BY(sync_mu_) = 1;

  std::atomic<int64_t> rows_pulled_{0};
  std::atomic<int64_t> rows_pushed_{0};
  std::atomic<int64_t> admissions_{0};
  std::atomic<int64_t> evicted_by_age_{0};
  std::atomic<int64_t> evicted_by_capacity_{0};
  std::atomic<int64_t> unadmitted_lookups_{0};
  std::atomic<int64_t> unadmitted_gradients_{0};
  std::atomic<int64_t> stale_pushes_dropped_{0};
};

// InvalidArgument naming the table and the field: a dimension outside
// [1, kMaxEmbeddingDim], negative policies, a scale that is not finite.
absl::Status ValidateEmbeddingTableOptions(const EmbeddingTableOptions& o);

inline constexpr int kMaxEmbeddingDim = 4096;

}  // namespace psflow

#endif  // PSFLOW_PS_EMBEDDING_TABLE_H_
