// Trainer's embedding-table steps (worker/trainer.h): staging a batch and
// its rows, the rows pull (not SYNC: the next batch's, prefetched by the
// background thread while this one computes) and the rows push (not SYNC:
// started by the background thread, in flight while the next step
// computes).
#include <optional>
#include <utility>

#include "common/status_macros.h"
#include "worker/trainer.h"

namespace psflow {

std::optional<WorkerClock> Trainer::RowsClock(int64_t clock) const {
  if (!bounded_) return std::nullopt;
  WorkerClock worker_clock;
  worker_clock.set_worker_index(options_.worker_index);
  worker_clock.set_clock(clock);
  return worker_clock;
}

absl::StatusOr<const Batch*> Trainer::StageBatch() {
  RETURN_IF_ERROR(AwaitPrefetchRows());
  StagedBatch& staged = staged_[staged_current_];
  if (!staged.batch.has_value()) {
    staged.batch = parts_.batches->Next();
    if (!staged.batch.has_value()) return nullptr;
    const absl::Time start = parts_.clock->Now();
    absl::Status prepared = staged.rows->Prepare(*staged.batch);
    AddRowsSetup(start);
    RETURN_IF_ERROR(prepared);
  }
  return &*staged.batch;
}

absl::StatusOr<Trainer::Next> Trainer::PullRows() {
  if (!has_tables_) return Next::kGoOn;
  StagedBatch& staged = staged_[staged_current_];
  if (!staged.pulled) {
    // Not prefetched (the first step, after a restart, SYNC): now, at this
    // step's version in SYNC, for this step's clock in BOUNDED.
    if (staged.pull == nullptr) {
      const absl::Time start = parts_.clock->Now();
      staged.pull =
          staged.rows->StartPull(*parts_.client, /*train=*/true,
                                 sync_ ? version_ : 0, RowsClock(clock_));
      AddRowsSetup(start);
    }
    const absl::Time rows_wait_start = parts_.clock->Now();
    absl::Status pulled_rows = staged.pull->Wait();
    staged.version = staged.pull->version();
    staged.pull = nullptr;
    Observe(&PhaseTotals::pull_wait, &WorkerMetrics::pull_wait_seconds,
            rows_wait_start);
    if (!pulled_rows.ok()) return AfterFailure(pulled_rows);
    staged.pulled = true;
  }
  if (!sync_) PostPrefetchRows();
  return Next::kGoOn;
}

void Trainer::PostPrefetchRows() {
  // BOUNDED: for the next step's clock, as the dense prefetch
  // (LoadParametersAndPrefetch): the servers answer once the slowest live
  // worker is close enough, so max_staleness holds for rows too.
  prefetch_ticket_ = StartCalls(
      [this, index = 1 - staged_current_, clock = RowsClock(clock_ + 1)] {
        prefetch_status_ = PrefetchRows(index, clock);
      },
      /*rows_setup=*/true);
}

absl::Status Trainer::PrefetchRows(int index,
                                   std::optional<WorkerClock> clock) {
  StagedBatch& next = staged_[index];
  if (!next.batch.has_value()) {
    next.batch = parts_.batches->Next();
    if (!next.batch.has_value()) return absl::OkStatus();
    RETURN_IF_ERROR(next.rows->Prepare(*next.batch));
  }
  if (next.pull == nullptr && !next.pulled) {
    next.pull = next.rows->StartPull(*parts_.client, /*train=*/true,
                                     /*min_version=*/0, std::move(clock));
  }
  return absl::OkStatus();
}

absl::Status Trainer::AwaitPrefetchRows() {
  if (prefetch_ticket_ != BackgroundQueue::kNothing) {
    const absl::Time start = parts_.clock->Now();
    background_->WaitFor(prefetch_ticket_);
    prefetch_ticket_ = BackgroundQueue::kNothing;
    AddRowsSetup(start);
  }
  // A batch whose ids could not be prepared ends training (as inline).
  return std::exchange(prefetch_status_, absl::OkStatus());
}

uint64_t Trainer::StartCalls(std::function<void()> start, bool rows_setup) {
  if (background_ != nullptr) return background_->Post(std::move(start));
  const absl::Time started = parts_.clock->Now();
  start();
  if (rows_setup) AddRowsSetup(started);
  return BackgroundQueue::kNothing;
}

void Trainer::SettleBackground() {
  if (background_ == nullptr) return;
  background_->Drain();
  // prefetch_status_ stays until StageBatch reads it.
  prefetch_ticket_ = BackgroundQueue::kNothing;
  pull_ticket_ = BackgroundQueue::kNothing;
  for (uint64_t& ticket : push_tickets_) ticket = BackgroundQueue::kNothing;
}

void Trainer::ReleaseBatch() {
  if (!has_tables_) return;
  StagedBatch& staged = staged_[staged_current_];
  staged.pull = nullptr;
  staged.pulled = false;
  if (staged.batch.has_value())
    parts_.batches->Recycle(*std::move(staged.batch));
  staged.batch.reset();
  // Not SYNC: the next step's batch is the prefetched one.
  if (!sync_) staged_current_ = 1 - staged_current_;
}

void Trainer::AddRowsSetup(absl::Time start) {
  phases_.rows_setup += parts_.clock->Now() - start;
}

void Trainer::DropRowPulls() {
  SettleBackground();  // a prefetch may be setting a pull
  // Dropping a handle waits for its calls and leaves the rows buffers
  // untouched (client/ps_client.h RowsHandle).
  for (StagedBatch& staged : staged_) {
    staged.pull = nullptr;
    staged.pulled = false;
  }
}

absl::StatusOr<Trainer::Next> Trainer::PushRows() {
  if (!has_tables_) return Next::kGoOn;
  BatchRows& rows = *staged_[staged_current_].rows;
  if (!sync_) {
    // It travels while the next step computes, awaited with this slot's
    // dense push (AwaitPushes). Its version is the one the rows were read
    // at, from which the servers count its staleness. The background
    // thread copies the gradients before the rows are prepared again (by
    // a prefetch posted after this).
    push_tickets_[grad_slot_] = StartCalls(
        [this, slot = grad_slot_, &rows,
         version = staged_[staged_current_].version] {
          row_pushes_[slot] =
              rows.StartPush(*parts_.client, version, options_.worker_index);
        },
        /*rows_setup=*/true);
    return Next::kGoOn;
  }
  const absl::Time rows_push_start = parts_.clock->Now();
  absl::Status pushed_rows =
      rows.Push(*parts_.client, version_, options_.worker_index);
  Observe(&PhaseTotals::push_wait, &WorkerMetrics::push_wait_seconds,
          rows_push_start);
  if (absl::IsAborted(pushed_rows) && sync_) {
    ++stale_;  // SYNC: the tables' step closed before these rows came.
    return Next::kGoOn;
  }
  if (!pushed_rows.ok()) return AfterPushError(pushed_rows);
  return Next::kGoOn;
}

}  // namespace psflow
