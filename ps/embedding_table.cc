#include "ps/embedding_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/job/row_placement.h"
#include "common/prefetch.h"

namespace psflow {
namespace {

// Rows per storage block: blocks are never moved, so a growing table never
// copies its rows.
constexpr uint32_t kBlockRows = 1024;
// Metadata per row: its update count and the version it was last used at.
constexpr int kMetaPerRow = 2;
// Index slots per row at the index's worst fill, in bytes (12 / 0.7).
constexpr int64_t kIndexBytesPerRow = 18;

}  // namespace

absl::Status ValidateEmbeddingTableOptions(const EmbeddingTableOptions& o) {
  auto invalid = [&](absl::string_view field, double value,
                     absl::string_view fix) {
    return absl::InvalidArgumentError(absl::StrCat(
        "embedding table '", o.name, "': ", field, " is ", value, "; ", fix));
  };
  if (o.name.empty()) {
    return absl::InvalidArgumentError(
        "an embedding table has no name; give every table a unique name");
  }
  if (o.dim < 1 || o.dim > kMaxEmbeddingDim) {
    return invalid("dim", o.dim,
                   absl::StrCat("use 1 to ", kMaxEmbeddingDim, ", e.g. 16"));
  }
  if (!std::isfinite(o.initializer.scale) || o.initializer.scale < 0) {
    return invalid("the initializer's scale", o.initializer.scale,
                   "use 0 or more, e.g. 0.05");
  }
  if (o.min_frequency < 0) {
    return invalid("min_frequency", o.min_frequency,
                   "use 0 (admit every id) or more");
  }
  if (o.min_frequency > UINT16_MAX) {
    return invalid("min_frequency", o.min_frequency,
                   absl::StrCat("use at most ", UINT16_MAX));
  }
  // The sketch is 2 bytes a counter, allocated when the table is: 2^26
  // counters are 128 MiB.
  if (o.admission_counters < 64 || o.admission_counters > (int64_t{1} << 26)) {
    return invalid("admission_counters", o.admission_counters,
                   "use 64 to 2^26 (67108864), e.g. 1048576");
  }
  if (o.evict_after_steps < 0) {
    return invalid("evict_after_steps", o.evict_after_steps,
                   "use 0 (never) or more");
  }
  if (o.max_rows < 0) {
    return invalid("max_rows", o.max_rows, "use 0 (no cap) or more");
  }
  return absl::OkStatus();
}

EmbeddingTable::EmbeddingTable(EmbeddingTableOptions options,
                               const Optimizer* optimizer,
                               const UpdateRule& rule)
    : options_(std::move(options)),
      optimizer_(optimizer),
      rule_(rule),
      row_floats_(options_.dim *
                  (1 + static_cast<int>(optimizer->slot_names().size()))),
      stripe_cap_(options_.max_rows == 0
                      ? 0
                      : std::max<int64_t>(
                            1, (options_.max_rows + kStripes - 1) / kStripes)),
      stripes_(new Stripe[kStripes]) {
  for (size_t s = 0; s < optimizer_->slot_names().size(); ++s) {
    slot_initial_.push_back(optimizer_->slot_initial_value(s));
  }
  if (options_.min_frequency > 1) {
    for (int s = 0; s < kStripes; ++s) {
      MutexLock lock(&stripes_[s].mu);
      stripes_[s].sketch = std::make_unique<AdmissionSketch>(
          std::max<int64_t>(64, options_.admission_counters / 4 / kStripes));
    }
  }
  if (options_.evict_after_steps > 0) {
    next_age_sweep_ = std::max<int64_t>(1, options_.evict_after_steps / 4);
  }
}

EmbeddingTable::~EmbeddingTable() { Clear(); }

const std::vector<std::string>& EmbeddingTable::slot_names() const {
  return optimizer_->slot_names();
}

int64_t EmbeddingTable::bytes_per_row() const {
  return row_floats_ * int64_t{4} + kMetaPerRow * 8 + kIndexBytesPerRow;
}

void EmbeddingTable::SetMemoryBudget(std::atomic<int64_t>* used,
                                     int64_t limit) {
  budget_used_ = used;
  budget_limit_ = limit;
}

int EmbeddingTable::StripeOf(int64_t id) {
  // The low bits: placement uses the high ones (row_placement.h).
  return static_cast<int>(RowHash(id) & (kStripes - 1));
}

void EmbeddingTable::GroupByStripe(absl::Span<const int64_t> ids,
                                   std::vector<uint32_t>& order,
                                   std::vector<uint32_t>& stripe_begin) {
  stripe_begin.assign(kStripes + 1, 0);
  std::vector<uint8_t> stripe(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    stripe[i] = static_cast<uint8_t>(StripeOf(ids[i]));
    ++stripe_begin[stripe[i] + 1];
  }
  for (int s = 0; s < kStripes; ++s) stripe_begin[s + 1] += stripe_begin[s];
  order.resize(ids.size());
  std::vector<uint32_t> next(stripe_begin.begin(), stripe_begin.end() - 1);
  for (size_t i = 0; i < ids.size(); ++i) {
    order[next[stripe[i]]++] = static_cast<uint32_t>(i);
  }
}

uint32_t EmbeddingTable::LookupChunk() const {
  // Creating a row in a capped stripe may evict rows by their last use,
  // which a chunk's rows found but not yet used have not had set: there,
  // one id at a time, as if there were no chunks.
  return stripe_cap_ > 0 ? 1 : kLookupChunk;
}

void EmbeddingTable::PrefetchIndex(const Stripe& s,
                                   absl::Span<const int64_t> ids,
                                   const std::vector<uint32_t>& order,
                                   uint32_t from, uint32_t to) {
  for (uint32_t k = from; k < to; ++k) s.index.Prefetch(ids[order[k]]);
}

void EmbeddingTable::PrefetchRowLocked(const Stripe& s, uint32_t row,
                                       bool values_only) const {
  if (row == RowIndex::kNone) return;
  const char* data =
      reinterpret_cast<const char*>(s.blocks[row / kBlockRows].get() +
                                    size_t{row % kBlockRows} * row_floats_);
  // A pull reads the values; a push updates the values and the slots.
  const int bytes = static_cast<int>(sizeof(float)) *
                    (values_only ? options_.dim : row_floats_);
  for (int offset = 0; offset < bytes; offset += kRowAlignment) {
    if (values_only) {
      PrefetchForRead(data + offset);
    } else {
      PrefetchForWrite(data + offset);
    }
  }
  // Both write the step the row was last used at.
  PrefetchForWrite(s.meta[row / kBlockRows].get() + (row % kBlockRows) * 2);
}

uint32_t EmbeddingTable::AllocateRowLocked(Stripe& s) {
  if (!s.free_rows.empty()) {
    const uint32_t row = s.free_rows.back();
    s.free_rows.pop_back();
    return row;
  }
  const uint32_t row = s.next_row++;
  if (row / kBlockRows >= s.blocks.size()) {
    s.blocks.emplace_back(new (std::align_val_t(
        kRowAlignment)) float[size_t{kBlockRows} * row_floats_]);
    s.meta.emplace_back(new int64_t[size_t{kBlockRows} * kMetaPerRow]);
  }
  return row;
}

void EmbeddingTable::FreeRowLocked(Stripe& s, int64_t id, uint32_t row) {
  s.index.Erase(id);
  s.free_rows.push_back(row);
  if (budget_used_ != nullptr) budget_used_->fetch_sub(bytes_per_row());
}

void EmbeddingTable::EvictLeastRecentlyUsedLocked(Stripe& s) {
  const int64_t count = std::max<int64_t>(1, s.index.size() / 32);
  const std::vector<std::pair<int64_t, uint32_t>> entries = s.index.Entries();
  std::vector<int64_t> last_steps;
  last_steps.reserve(entries.size());
  for (const auto& [id, row] : entries) {
    last_steps.push_back(s.meta[row / kBlockRows][(row % kBlockRows) * 2 + 1]);
  }
  std::nth_element(last_steps.begin(), last_steps.begin() + (count - 1),
                   last_steps.end());
  const int64_t threshold = last_steps[count - 1];
  // Everything older than the threshold, then rows at it until `count`.
  std::vector<std::pair<int64_t, uint32_t>> victims;
  std::vector<std::pair<int64_t, uint32_t>> at_threshold;
  for (const auto& [id, row] : entries) {
    const int64_t last = s.meta[row / kBlockRows][(row % kBlockRows) * 2 + 1];
    if (last < threshold) victims.emplace_back(id, row);
    if (last == threshold) at_threshold.emplace_back(id, row);
  }
  for (const auto& v : at_threshold) {
    if (static_cast<int64_t>(victims.size()) >= count) break;
    victims.push_back(v);
  }
  for (const auto& [id, row] : victims) FreeRowLocked(s, id, row);
  evicted_by_capacity_ += static_cast<int64_t>(victims.size());
}

absl::StatusOr<uint32_t> EmbeddingTable::FindOrCreateLocked(Stripe& s,
                                                            int64_t id,
                                                            bool create,
                                                            int64_t step) {
  uint32_t row = s.index.Find(id);
  if (row != RowIndex::kNone || !create) return row;
  if (stripe_cap_ > 0 && s.index.size() >= stripe_cap_) {
    EvictLeastRecentlyUsedLocked(s);
  }
  if (budget_used_ != nullptr) {
    const int64_t cost = bytes_per_row();
    if (budget_used_->fetch_add(cost) + cost > budget_limit_) {
      budget_used_->fetch_sub(cost);
      return absl::ResourceExhaustedError(absl::StrCat(
          "embedding table '", options_.name, "': creating a row would pass ",
          "this server's memory budget for variables (--max_variable_bytes ",
          "less the dense variables: ", budget_limit_, " bytes, ",
          bytes_per_row(),
          " per row); cap the table with max_rows, evict stale rows with "
          "evict_after_steps, admit fewer ids with min_frequency, or add "
          "parameter servers"));
    }
  }
  row = AllocateRowLocked(s);
  float* data =
      s.blocks[row / kBlockRows].get() + size_t{row % kBlockRows} * row_floats_;
  options_.initializer.Fill(id, absl::MakeSpan(data, options_.dim));
  for (size_t slot = 0; slot < slot_initial_.size(); ++slot) {
    std::fill_n(data + (slot + 1) * options_.dim, options_.dim,
                slot_initial_[slot]);
  }
  int64_t* meta = s.meta[row / kBlockRows].get() + (row % kBlockRows) * 2;
  meta[0] = 0;
  meta[1] = step;
  s.index.Insert(id, row);
  ++admissions_;
  return row;
}

absl::StatusOr<int64_t> EmbeddingTable::Pull(absl::Span<const int64_t> ids,
                                             bool train,
                                             absl::Span<float> out) {
  const int dim = options_.dim;
  if (out.size() != ids.size() * dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "embedding table '", options_.name, "': ", ids.size(),
        " ids need room for ", ids.size() * dim, " floats, not ", out.size()));
  }
  const int64_t step = Version();
  const bool admit_on_pull = options_.min_frequency <= 1;
  // Evaluation reads an id without a row as the table's default row,
  // zeros, as the exported model does (docs/models.md): the initializer's
  // row of an id never trained is noise, not knowledge.
  const bool zeros_for_missing =
      !train || (options_.min_frequency > 1 && options_.unadmitted_zeros);
  std::vector<uint32_t> order;
  std::vector<uint32_t> begin;
  GroupByStripe(ids, order, begin);
  const uint32_t chunk = LookupChunk();
  int64_t unadmitted = 0;
  absl::Status status;
  for (int st = 0; st < kStripes && status.ok(); ++st) {
    if (begin[st] == begin[st + 1]) continue;
    Stripe& s = stripes_[st];
    MutexLock lock(&s.mu);
    const uint32_t end = begin[st + 1];
    PrefetchIndex(s, ids, order, begin[st], std::min(end, begin[st] + chunk));
    for (uint32_t k0 = begin[st]; k0 < end; k0 += chunk) {
      const uint32_t k1 = std::min(end, k0 + chunk);
      PrefetchIndex(s, ids, order, k1, std::min(end, k1 + chunk));
      // Every row of the chunk found (or created) first, then read.
      uint32_t found[kLookupChunk];
      for (uint32_t k = k0; k < k1; ++k) {
        absl::StatusOr<uint32_t> row =
            FindOrCreateLocked(s, ids[order[k]], train && admit_on_pull, step);
        if (!row.ok()) {
          status = row.status();
          break;
        }
        found[k - k0] = *row;
        PrefetchRowLocked(s, *row, /*values_only=*/true);
      }
      if (!status.ok()) break;
      for (uint32_t k = k0; k < k1; ++k) {
        const uint32_t i = order[k];
        const uint32_t row = found[k - k0];
        float* dst = out.data() + size_t{i} * dim;
        if (row == RowIndex::kNone) {
          if (train) ++unadmitted;
          if (zeros_for_missing) {
            std::fill_n(dst, dim, 0.0f);
          } else {
            options_.initializer.Fill(ids[i], absl::MakeSpan(dst, dim));
          }
          continue;
        }
        const float* data = s.blocks[row / kBlockRows].get() +
                            size_t{row % kBlockRows} * row_floats_;
        std::memcpy(dst, data, sizeof(float) * dim);
        if (train) s.meta[row / kBlockRows][(row % kBlockRows) * 2 + 1] = step;
      }
    }
  }
  if (!status.ok()) return status;
  rows_pulled_ += static_cast<int64_t>(ids.size());
  if (train && options_.min_frequency > 1) unadmitted_lookups_ += unadmitted;
  return step;
}

absl::Status EmbeddingTable::ApplyRows(absl::Span<const int64_t> ids,
                                       absl::Span<const float> gradients,
                                       int64_t step, double lr_scale,
                                       bool count_admission) {
  const int dim = options_.dim;
  const double lr = rule_.schedule->At(step) * lr_scale;
  const bool admission = options_.min_frequency > 1;
  std::vector<uint32_t> order;
  std::vector<uint32_t> begin;
  GroupByStripe(ids, order, begin);
  std::vector<absl::Span<float>> slots(slot_initial_.size());
  absl::Status first_error;
  int64_t unadmitted = 0;
  const uint32_t chunk = LookupChunk();
  for (int st = 0; st < kStripes; ++st) {
    if (begin[st] == begin[st + 1]) continue;
    Stripe& s = stripes_[st];
    MutexLock lock(&s.mu);
    const uint32_t end = begin[st + 1];
    PrefetchIndex(s, ids, order, begin[st], std::min(end, begin[st] + chunk));
    for (uint32_t k0 = begin[st]; k0 < end; k0 += chunk) {
      const uint32_t k1 = std::min(end, k0 + chunk);
      PrefetchIndex(s, ids, order, k1, std::min(end, k1 + chunk));
      // Every row of the chunk found (or created) first, then updated.
      uint32_t found[kLookupChunk];
      for (uint32_t k = k0; k < k1; ++k) {
        const int64_t id = ids[order[k]];
        found[k - k0] = RowIndex::kNone;
        bool create = true;
        if (admission && s.index.Find(id) == RowIndex::kNone) {
          const int64_t seen =
              count_admission ? s.sketch->Add(id) : s.sketch->Estimate(id);
          create = seen >= options_.min_frequency;
        }
        absl::StatusOr<uint32_t> row = FindOrCreateLocked(s, id, create, step);
        if (!row.ok()) {
          if (first_error.ok()) first_error = row.status();
          continue;
        }
        if (*row == RowIndex::kNone) {
          ++unadmitted;
          continue;
        }
        found[k - k0] = *row;
        PrefetchRowLocked(s, *row, /*values_only=*/false);
      }
      for (uint32_t k = k0; k < k1; ++k) {
        const uint32_t row = found[k - k0];
        if (row == RowIndex::kNone) continue;
        const uint32_t i = order[k];
        float* data = s.blocks[row / kBlockRows].get() +
                      size_t{row % kBlockRows} * row_floats_;
        for (size_t slot = 0; slot < slots.size(); ++slot) {
          slots[slot] = absl::MakeSpan(data + (slot + 1) * dim, dim);
        }
        int64_t* meta = s.meta[row / kBlockRows].get() + (row % kBlockRows) * 2;
        optimizer_->Apply(lr, ++meta[0], absl::MakeSpan(data, dim),
                          gradients.subspan(size_t{i} * dim, dim), slots);
        meta[1] = step;
      }
    }
  }
  rows_pushed_ += static_cast<int64_t>(ids.size());
  unadmitted_gradients_ += unadmitted;
  return first_error;
}

absl::StatusOr<std::pair<PushOutcome, int64_t>> EmbeddingTable::Push(
    absl::Span<const int64_t> ids, absl::Span<const float> gradients,
    int64_t version, int worker) {
  if (gradients.size() != ids.size() * options_.dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "embedding table '", options_.name, "': ", ids.size(), " ids need ",
        ids.size() * options_.dim, " gradient floats, not ", gradients.size()));
  }
  if (rule_.sync) return PushSync(ids, gradients, version, worker);
  // ASYNC: this push is update number `step` + 1.
  const int64_t step = version_.fetch_add(1);
  double lr_scale = 1.0;
  if (rule_.staleness_aware && version >= 0 && version <= step) {
    lr_scale = 1.0 / static_cast<double>(step - version + 1);
  }
  absl::Status applied =
      ApplyRows(ids, gradients, step, lr_scale, /*count_admission=*/true);
  MaybeSweepByAge(step + 1);
  std::vector<std::function<void()>> ready;
  {
    MutexLock lock(&sync_mu_);
    if (!waiters_.empty()) ready = AdvanceLocked();
  }
  for (auto& r : ready) r();
  if (!applied.ok()) return applied;
  return std::make_pair(PushOutcome::kApplied, step + 1);
}

absl::StatusOr<std::pair<PushOutcome, int64_t>> EmbeddingTable::PushSync(
    absl::Span<const int64_t> ids, absl::Span<const float> gradients,
    int64_t version, int worker) {
  std::vector<std::function<void()>> ready;
  std::pair<PushOutcome, int64_t> outcome;
  {
    MutexLock lock(&sync_mu_);
    const int64_t current = version_.load();
    if (version < current) {
      ++stale_pushes_dropped_;
      return absl::AbortedError(absl::StrCat(
          "embedding table '", options_.name, "': gradient for version ",
          version, " is stale; the table is at version ", current));
    }
    if (version > current) {
      return absl::InvalidArgumentError(absl::StrCat(
          "embedding table '", options_.name, "': gradient for version ",
          version, " is ahead of the table (version ", current,
          "); pull before pushing"));
    }
    if (!contributors_.insert(worker).second) {
      return std::make_pair(PushOutcome::kDuplicate, current);
    }
    const int dim = options_.dim;
    // The mean is accumulated (each gradient scaled as it arrives): a sum
    // of finite gradients can overflow, their mean cannot.
    const float scale = 1.0f / static_cast<float>(rule_.replicas_to_aggregate);
    for (size_t i = 0; i < ids.size(); ++i) {
      auto [it, added] = aggregate_rows_.try_emplace(
          ids[i], static_cast<uint32_t>(aggregate_ids_.size()));
      if (added) {
        aggregate_ids_.push_back(ids[i]);
        aggregate_.resize(aggregate_.size() + dim, 0.0f);
      }
      float* sum = aggregate_.data() + size_t{it->second} * dim;
      const float* g = gradients.data() + i * dim;
      for (int j = 0; j < dim; ++j) sum[j] += scale * g[j];
    }
    if (options_.min_frequency > 1) {
      // Every worker's sighting counts towards admission.
      for (int64_t id : ids) {
        Stripe& s = stripes_[StripeOf(id)];
        MutexLock stripe_lock(&s.mu);
        if (s.index.Find(id) == RowIndex::kNone) s.sketch->Add(id);
      }
    }
    if (static_cast<int>(contributors_.size()) >= rule_.replicas_to_aggregate) {
      ready = ApplyAggregateLocked();
      outcome = {PushOutcome::kApplied, version_.load()};
    } else {
      outcome = {PushOutcome::kAccumulated, current};
    }
  }
  for (auto& r : ready) r();
  return outcome;
}

std::vector<std::function<void()>> EmbeddingTable::ApplyAggregateLocked() {
  const int64_t step = version_.load();
  if (step + 1 > hold_limit_) {
    aggregate_held_ = true;
    return {};
  }
  aggregate_held_ = false;
  // A row the budget refused is skipped; the step still completes so the
  // job goes on, and the refusal is logged by the caller's next push.
  absl::Status applied = ApplyRows(aggregate_ids_, aggregate_, step, 1.0,
                                   /*count_admission=*/false);
  (void)applied;
  aggregate_rows_.clear();
  aggregate_ids_.clear();
  aggregate_.clear();
  contributors_.clear();
  std::vector<std::function<void()>> ready = AdvanceLocked();
  MaybeSweepByAge(step + 1);
  return ready;
}

std::vector<std::function<void()>> EmbeddingTable::AdvanceLocked() {
  if (rule_.sync) version_.fetch_add(1);
  const int64_t version = version_.load();
  std::vector<std::function<void()>> ready;
  auto keep = std::remove_if(waiters_.begin(), waiters_.end(), [&](Waiter& w) {
    if (w.min_version > version) return false;
    ready.push_back(std::move(w.ready));
    return true;
  });
  waiters_.erase(keep, waiters_.end());
  return ready;
}

void EmbeddingTable::MaybeSweepByAge(int64_t version) {
  if (options_.evict_after_steps == 0) return;
  int64_t next = next_age_sweep_.load();
  if (version < next) return;
  const int64_t period = std::max<int64_t>(1, options_.evict_after_steps / 4);
  if (!next_age_sweep_.compare_exchange_strong(next, version + period)) return;
  const int64_t oldest_kept = version - options_.evict_after_steps;
  for (int st = 0; st < kStripes; ++st) {
    Stripe& s = stripes_[st];
    MutexLock lock(&s.mu);
    std::vector<std::pair<int64_t, uint32_t>> victims;
    for (const auto& [id, row] : s.index.Entries()) {
      if (s.meta[row / kBlockRows][(row % kBlockRows) * 2 + 1] < oldest_kept) {
        victims.emplace_back(id, row);
      }
    }
    for (const auto& [id, row] : victims) FreeRowLocked(s, id, row);
    evicted_by_age_ += static_cast<int64_t>(victims.size());
  }
}

int64_t EmbeddingTable::Version() const { return version_.load(); }

EmbeddingTableStats EmbeddingTable::Stats() const {
  EmbeddingTableStats stats;
  for (int st = 0; st < kStripes; ++st) {
    const Stripe& s = stripes_[st];
    MutexLock lock(&s.mu);
    stats.rows += s.index.size();
    stats.bytes += s.index.bytes() +
                   static_cast<int64_t>(s.blocks.size()) * kBlockRows *
                       (row_floats_ * 4 + kMetaPerRow * 8) +
                   static_cast<int64_t>(s.free_rows.capacity() * 4);
    if (s.sketch != nullptr) stats.bytes += s.sketch->bytes();
  }
  stats.version = Version();
  stats.rows_pulled = rows_pulled_.load();
  stats.rows_pushed = rows_pushed_.load();
  stats.admissions = admissions_.load();
  stats.evicted_by_age = evicted_by_age_.load();
  stats.evicted_by_capacity = evicted_by_capacity_.load();
  stats.unadmitted_lookups = unadmitted_lookups_.load();
  stats.unadmitted_gradients = unadmitted_gradients_.load();
  stats.stale_pushes_dropped = stale_pushes_dropped_.load();
  return stats;
}

void EmbeddingTable::SetHoldLimit(int64_t limit) {
  std::vector<std::function<void()>> ready;
  {
    MutexLock lock(&sync_mu_);
    hold_limit_ = limit;
    if (aggregate_held_ && version_.load() + 1 <= limit) {
      ready = ApplyAggregateLocked();
    }
  }
  for (auto& r : ready) r();
}

std::optional<uint64_t> EmbeddingTable::WhenVersionReached(
    int64_t min_version, std::function<void()> ready) {
  MutexLock lock(&sync_mu_);
  if (version_.load() >= min_version) return std::nullopt;
  const uint64_t id = next_waiter_id_++;
  waiters_.push_back(Waiter{id, min_version, std::move(ready)});
  return id;
}

bool EmbeddingTable::CancelWait(uint64_t id) {
  MutexLock lock(&sync_mu_);
  for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
    if (it->id == id) {
      waiters_.erase(it);
      return true;
    }
  }
  return false;
}

int64_t EmbeddingTable::VisitStripe(
    int stripe, const std::function<void(const SavedRow&)>& visit) const {
  const int64_t version = Version();
  const Stripe& s = stripes_[stripe];
  MutexLock lock(&s.mu);
  for (const auto& [id, row] : s.index.Entries()) {
    const int64_t* meta =
        s.meta[row / kBlockRows].get() + (row % kBlockRows) * 2;
    SavedRow saved;
    saved.id = id;
    saved.updates = meta[0];
    saved.last_step = meta[1];
    saved.data = absl::MakeConstSpan(s.blocks[row / kBlockRows].get() +
                                         size_t{row % kBlockRows} * row_floats_,
                                     row_floats_);
    visit(saved);
  }
  return version;
}

void EmbeddingTable::Clear() {
  for (int st = 0; st < kStripes; ++st) {
    Stripe& s = stripes_[st];
    MutexLock lock(&s.mu);
    if (budget_used_ != nullptr) {
      budget_used_->fetch_sub(s.index.size() * bytes_per_row());
    }
    s.index.Clear();
    s.blocks.clear();
    s.meta.clear();
    std::vector<uint32_t>().swap(s.free_rows);
    s.next_row = 0;
  }
  MutexLock lock(&sync_mu_);
  aggregate_rows_.clear();
  aggregate_ids_.clear();
  aggregate_.clear();
  contributors_.clear();
  aggregate_held_ = false;
}

absl::Status EmbeddingTable::AddRestoredRow(const SavedRow& row) {
  if (static_cast<int>(row.data.size()) != row_floats_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "embedding table '", options_.name, "': a restored row of id ", row.id,
        " has ", row.data.size(), " floats; this table stores ", row_floats_,
        " (dimension ", options_.dim, " with ", slot_initial_.size(),
        " optimizer slots)"));
  }
  Stripe& s = stripes_[StripeOf(row.id)];
  MutexLock lock(&s.mu);
  const bool existed = s.index.Find(row.id) != RowIndex::kNone;
  absl::StatusOr<uint32_t> index =
      FindOrCreateLocked(s, row.id, /*create=*/true, row.last_step);
  if (!index.ok()) return index.status();
  if (!existed) --admissions_;  // restored, not admitted
  float* data = s.blocks[*index / kBlockRows].get() +
                size_t{*index % kBlockRows} * row_floats_;
  std::memcpy(data, row.data.data(), sizeof(float) * row_floats_);
  int64_t* meta = s.meta[*index / kBlockRows].get() + (*index % kBlockRows) * 2;
  meta[0] = row.updates;
  meta[1] = row.last_step;
  return absl::OkStatus();
}

void EmbeddingTable::SetRestoredVersion(int64_t version) {
  std::vector<std::function<void()>> ready;
  {
    MutexLock lock(&sync_mu_);
    version_.store(version);
    if (options_.evict_after_steps > 0) {
      next_age_sweep_ =
          version + std::max<int64_t>(1, options_.evict_after_steps / 4);
    }
    // Waiters for versions now reached run (a restore moves forward).
    std::vector<Waiter> keep;
    for (Waiter& w : waiters_) {
      if (w.min_version <= version) {
        ready.push_back(std::move(w.ready));
      } else {
        keep.push_back(std::move(w));
      }
    }
    waiters_ = std::move(keep);
  }
  for (auto& r : ready) r();
}

}  // namespace psflow
