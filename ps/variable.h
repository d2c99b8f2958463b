// One dense float32 variable held by a parameter server, with its optimizer
// slots, split into fixed-size chunks.
//
// A variable is updated either by the server's optimizer (a push is a
// gradient) or, for a non-trainable statistic, as a moving average (a push
// is a value x: v = momentum * v + (1 - momentum) * x, with no slots, no
// learning rate and no staleness scaling). Both go through the same push
// path, so sync aggregation, stale and duplicate handling and versions are
// identical; only the update object applied to a chunk differs.
//
// Each chunk is the unit of locking, versioning and sync aggregation, so
// pushes to different chunks (the client sends 1-4 MB chunks concurrently)
// apply in parallel on different threads, while pushes to the same chunk
// serialize and never lose an update.
//
// A chunk's version counts the updates applied to it: in async mode one per
// push, in sync mode one per aggregated step. It is the global step used by
// the learning-rate schedule and Adam's bias correction.
//
// A chunk's apply may be split into ranges that run on the server's apply
// threads (UpdateRule::pool) while the pushing thread holds the chunk's
// lock and waits for them: the chunk is still updated as one unit.
//
// Thread-safe. Callbacks registered with WhenVersionReached() run on the thread
// that advanced the version (a pool thread when a batch's chunks apply in
// parallel), after its lock is released.
#ifndef PSFLOW_PS_VARIABLE_H_
#define PSFLOW_PS_VARIABLE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/job/logical_variable.h"
#include "common/mutex.h"
#include "ps/apply_pool.h"
#include "ps/gradient.h"
#include "ps/lr_schedule.h"
#include "ps/optimizer.h"

namespace psflow {

// How a variable turns gradients into updates; shared by all variables of a
// server and constant after Configure.
struct UpdateRule {
  const Optimizer* optimizer = nullptr;
  const LrSchedule* schedule = nullptr;
  bool sync = false;
  int replicas_to_aggregate = 1;  // sync only
  // Async: each update's learning rate divided by (staleness + 1).
  bool staleness_aware = false;
  // Spreads a chunk's apply (and a sync push's accumulation) over the
  // server's cores; null: on the pushing thread alone. The result is the
  // same either way (ps/apply_pool.h).
  ApplyPool* pool = nullptr;
};

// What a push did, for the server's counters.
enum class PushOutcome {
  kApplied,      // an update was applied (async, or the K-th sync gradient)
  kAccumulated,  // sync: counted towards the current step
  kDuplicate,    // sync: this worker already contributed to this step
};

class Variable {
 public:
  // `update` and `momentum` (kMovingAverage, in [0, 1), checked by the
  // caller) choose how this variable's pushes change it; `rule` supplies the
  // optimizer, schedule and mode.
  Variable(std::string name, std::vector<int64_t> shape, int64_t num_elements,
           int64_t chunk_elements, const UpdateRule& rule,
           VariableUpdate update = VariableUpdate::kOptimizer,
           float momentum = 0);
  Variable(const Variable&) = delete;
  Variable& operator=(const Variable&) = delete;
  ~Variable();

  const std::string& name() const { return name_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t num_elements() const { return num_elements_; }
  int64_t chunk_elements() const { return chunk_elements_; }
  int num_chunks() const { return static_cast<int>(chunks_.size()); }
  VariableUpdate update() const { return update_; }
  float momentum() const { return momentum_; }  // kMovingAverage only

  // Checks that [offset, offset + count) is exactly one chunk; returns its
  // index. InvalidArgument naming the variable and the expected range.
  absl::StatusOr<int> ChunkFor(int64_t offset, int64_t count) const;

  // Copies chunk `chunk`'s values into `out` (its full length); returns the
  // chunk's version at the time of the copy.
  int64_t Read(int chunk, absl::Span<float> out) const;

  // Chunk `chunk`'s values in place. Writers may change them at any time;
  // see ParameterServerCore::View.
  absl::Span<const float> Values(int chunk) const;

  // Overwrites chunk `chunk`'s values (not its slots or version).
  void Write(int chunk, absl::Span<const float> values);

  // Applies or accumulates a finite gradient (a moving average's value) for
  // chunk `chunk`. `version` and `worker` matter in sync mode only: a
  // gradient computed from an older version is Aborted (stale), from a
  // newer one InvalidArgument. Returns the outcome and the version after
  // the push.
  // The gradient may be read block by block (ps/gradient.h).
  absl::StatusOr<std::pair<PushOutcome, int64_t>> Push(int chunk,
                                                       const Gradient& gradient,
                                                       int64_t version,
                                                       int worker);

  // The chunk's current version.
  int64_t Version(int chunk) const;

  // The cost of one update per float relative to Adam's
  // (Optimizer::relative_cost), for spreading pushes over threads.
  double apply_cost() const { return optimizer_->relative_cost(); }

  // The optimizer's slot names (e.g. Adam's "m", "v"), in slot order; none
  // for a moving average.
  const std::vector<std::string>& slot_names() const;

  // Copies chunk `chunk`'s values and every slot (each its full length;
  // `slots` in slot_names() order) under the chunk's lock, so all of them
  // belong to the returned version: a checkpoint's consistent unit.
  int64_t Snapshot(int chunk, absl::Span<float> values,
                   const std::vector<absl::Span<float>>& slots) const;

  // Restores chunk `chunk` from a checkpoint: `fill` writes its values and
  // slots in place (each span the chunk's length, slots in slot_names()
  // order) under the chunk's lock and sets filled_slots[s] for each slot it
  // wrote; the rest reset to their initial values. Then the version is set
  // and any partial sync aggregate and hold dropped. On an error from
  // `fill` (returned) the chunk may be half written and keeps its version.
  absl::Status RestoreInPlace(
      int chunk, int64_t version,
      const std::function<absl::Status(
          absl::Span<float> values, const std::vector<absl::Span<float>>& slots,
          std::vector<bool>& filled_slots)>& fill);

  // SYNC: no update may take chunk `chunk` beyond version `limit`; the
  // aggregate that would is kept until the limit rises (checkpoints hold
  // every chunk at one step this way). A lower limit never undoes updates;
  // kNoHold lifts it.
  static constexpr int64_t kNoHold = INT64_MAX;
  void SetHoldLimit(int chunk, int64_t limit);

  // When chunk `chunk` is below `min_version`, arranges for `ready` to run
  // once it gets there and returns an id for CancelWait(). Returns nullopt,
  // without ever calling `ready`, when the chunk is already there.
  std::optional<uint64_t> WhenVersionReached(int chunk, int64_t min_version,
                                             std::function<void()> ready);

  // Drops a pending WhenVersionReached() callback. Returns true when it was
  // still pending (it will now never run).
  bool CancelWait(int chunk, uint64_t id);

 private:
  struct Waiter {
    uint64_t id;
    int64_t min_version;
    std::function<void()> ready;
  };

  struct Chunk {
    int64_t begin = 0;  // element offset; constant
    int64_t size = 0;   // elements; constant
    mutable Mutex mu;
    int64_t version ABSL_GUARDED_BY(mu) = 0;
    // Sync aggregation for the current version.
    std::vector<float> sum ABSL_GUARDED_BY(mu);
    std::set<int> contributors ABSL_GUARDED_BY(mu);
    // SYNC: the highest version updates may reach (see SetHoldLimit), and
    // whether a complete aggregate waits for it to rise.
    int64_t hold_limit ABSL_GUARDED_BY(mu) = kNoHold;
    bool aggregate_held ABSL_GUARDED_BY(mu) = false;
    std::vector<Waiter> waiters ABSL_GUARDED_BY(mu);
  };

  // Applies `gradient` to chunk `c` as update number c.version + 1, at
  // the schedule's learning rate times `lr_scale` (a moving average has no
  // learning rate).
  void ApplyLocked(Chunk& c, const Gradient& gradient, double lr_scale = 1.0)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);

  // The learning rate of chunk `c`'s next update, times `lr_scale`.
  double LearningRateLocked(const Chunk& c, double lr_scale) const
      ABSL_SHARED_LOCKS_REQUIRED(c.mu);

  // One update of floats [begin, end) of the chunk that starts at element
  // `chunk_begin`, by the same floats of `gradient` (the chunk's). The
  // caller holds the chunk's lock, on this thread or one waiting for it.
  void ApplyRange(int64_t chunk_begin, double lr, int64_t step,
                  const Gradient& gradient, int64_t begin, int64_t end) const;

  // Calls fn(begin, end) over ranges covering [0, n) of work
  // `relative_cost` per float (ApplyPool): split over the pool when the
  // rule has one, else once on this thread.
  void ForEachRange(int64_t n, double relative_cost,
                    absl::FunctionRef<void(int64_t, int64_t)> fn) const;

  // Applies the complete sync aggregate of chunk `c` unless a hold keeps
  // it; returns the waiters to run.
  std::vector<std::function<void()>> ApplyAggregateLocked(Chunk& c)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);

  // Advances the version and removes the waiters it satisfies; the caller
  // runs them after unlocking.
  std::vector<std::function<void()>> AdvanceLocked(Chunk& c)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);

  // Constant after construction.
  const std::string name_;
  const std::vector<int64_t> shape_;
  const int64_t num_elements_;
  const int64_t chunk_elements_;
  const UpdateRule rule_;
  const VariableUpdate update_;
  const float momentum_;
  // kMovingAverage: the variable's own update object; null otherwise.
  const std::unique_ptr<const Optimizer> moving_average_;
  // The update ApplyLocked() uses: rule_.optimizer or moving_average_.
  const Optimizer* const optimizer_;
  // Elements guarded by their chunk's mu (written by the threads of one
  // apply, each its own range, while the pushing thread holds it).
  std::unique_ptr<float[]> values_;
  std::vector<std::unique_ptr<float[]>> slots_;  // likewise
  std::vector<std::unique_ptr<Chunk>> chunks_;
};

}  // namespace psflow

#endif  // PSFLOW_PS_VARIABLE_H_
