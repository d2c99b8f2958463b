#include "ps/variable.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "ps/finite_values.h"

namespace psflow {
namespace {

std::atomic<uint64_t> next_waiter_id{1};

// The work of one pass over a sync aggregate (adding a gradient, or taking
// the mean and clearing it) per float, relative to Adam's update: memory
// traffic like SGD's.
constexpr double kSumCost = 0.5;

}  // namespace

Variable::Variable(std::string name, std::vector<int64_t> shape,
                   int64_t num_elements, int64_t chunk_elements,
                   const UpdateRule& rule, VariableUpdate update,
                   float momentum)
    : name_(std::move(name)),
      shape_(std::move(shape)),
      num_elements_(num_elements),
      chunk_elements_(chunk_elements),
      rule_(rule),
      update_(update),
      momentum_(update == VariableUpdate::kMovingAverage ? momentum : 0.0f),
      moving_average_(update == VariableUpdate::kMovingAverage
                          ? MovingAverageUpdate(momentum)
                          : nullptr),
      optimizer_(moving_average_ != nullptr ? moving_average_.get()
                                            : rule.optimizer),
      values_(new float[std::max<int64_t>(num_elements, 1)]) {
  std::fill_n(values_.get(), num_elements_, 0.0f);
  const auto& slot_names = optimizer_->slot_names();
  for (size_t s = 0; s < slot_names.size(); ++s) {
    slots_.emplace_back(new float[std::max<int64_t>(num_elements, 1)]);
    std::fill_n(slots_.back().get(), num_elements_,
                optimizer_->slot_initial_value(static_cast<int>(s)));
  }
  for (int64_t begin = 0; begin < num_elements_; begin += chunk_elements_) {
    auto chunk = std::make_unique<Chunk>();
    chunk->begin = begin;
    chunk->size = std::min(chunk_elements_, num_elements_ - begin);
    chunks_.push_back(std::move(chunk));
  }
}

Variable::~Variable() = default;

absl::StatusOr<int> Variable::ChunkFor(int64_t offset, int64_t count) const {
  if (offset >= 0 && offset < num_elements_ && offset % chunk_elements_ == 0) {
    const int index = static_cast<int>(offset / chunk_elements_);
    if (count == chunks_[index]->size) return index;
  }
  const int64_t want = (offset >= 0 && offset < num_elements_)
                           ? std::min(chunk_elements_, num_elements_ - offset)
                           : std::min(chunk_elements_, num_elements_);
  return absl::InvalidArgumentError(
      absl::StrCat("variable \"", name_, "\" (", num_elements_,
                   " elements): range [", offset, ", ", offset + count,
                   ") is not one chunk; requests must start at a multiple of ",
                   chunk_elements_, " elements and cover one chunk (e.g. ",
                   want, " elements)"));
}

int64_t Variable::Read(int chunk, absl::Span<float> out) const {
  const Chunk& c = *chunks_[chunk];
  MutexLock lock(&c.mu);
  std::memcpy(out.data(), values_.get() + c.begin, c.size * sizeof(float));
  return c.version;
}

absl::Span<const float> Variable::Values(int chunk) const {
  const Chunk& c = *chunks_[chunk];
  return absl::MakeConstSpan(values_.get() + c.begin, c.size);
}

void Variable::Write(int chunk, absl::Span<const float> values) {
  Chunk& c = *chunks_[chunk];
  MutexLock lock(&c.mu);
  std::memcpy(values_.get() + c.begin, values.data(), c.size * sizeof(float));
}

int64_t Variable::Version(int chunk) const {
  const Chunk& c = *chunks_[chunk];
  MutexLock lock(&c.mu);
  return c.version;
}

double Variable::LearningRateLocked(const Chunk& c, double lr_scale) const {
  return update_ == VariableUpdate::kOptimizer
             ? rule_.schedule->At(c.version) * lr_scale
             : 0.0;  // a moving average has none
}

void Variable::ApplyRange(int64_t chunk_begin, double lr, int64_t step,
                          const Gradient& gradient, int64_t begin,
                          int64_t end) const {
  // Every update is elementwise, so applying a range block by block is
  // bit for bit applying it at once (as splitting it over threads is).
  gradient.ForEachBlock(
      begin, end, [&](int64_t offset, absl::Span<const float> block) {
        const int64_t at = chunk_begin + offset;
        const int64_t n = static_cast<int64_t>(block.size());
        absl::InlinedVector<absl::Span<float>, 4> slot_spans;
        for (const auto& slot : slots_) {
          slot_spans.push_back(absl::MakeSpan(slot.get() + at, n));
        }
        optimizer_->Apply(lr, step, absl::MakeSpan(values_.get() + at, n),
                          block, slot_spans);
      });
}

void Variable::ForEachRange(
    int64_t n, double relative_cost,
    absl::FunctionRef<void(int64_t, int64_t)> fn) const {
  if (rule_.pool != nullptr) {
    rule_.pool->ForEachRange(n, relative_cost, fn);
  } else {
    fn(0, n);
  }
}

void Variable::ApplyLocked(Chunk& c, const Gradient& gradient,
                           double lr_scale) {
  const double lr = LearningRateLocked(c, lr_scale);
  const int64_t step = c.version + 1;
  const int64_t chunk_begin = c.begin;
  ForEachRange(c.size, apply_cost(), [&](int64_t begin, int64_t end) {
    ApplyRange(chunk_begin, lr, step, gradient, begin, end);
  });
}

std::vector<std::function<void()>> Variable::AdvanceLocked(Chunk& c) {
  const int64_t version = ++c.version;
  std::vector<std::function<void()>> ready;
  auto keep =
      std::remove_if(c.waiters.begin(), c.waiters.end(), [&](Waiter& w) {
        if (w.min_version > version) return false;
        ready.push_back(std::move(w.ready));
        return true;
      });
  c.waiters.erase(keep, c.waiters.end());
  return ready;
}

absl::StatusOr<std::pair<PushOutcome, int64_t>> Variable::Push(
    int chunk, const Gradient& gradient, int64_t version, int worker) {
  Chunk& c = *chunks_[chunk];
  std::vector<std::function<void()>> ready;
  std::pair<PushOutcome, int64_t> result;
  {
    MutexLock lock(&c.mu);
    if (!rule_.sync) {
      // Staleness-aware async SGD: a gradient `staleness` updates late
      // moves the chunk 1 / (staleness + 1) as far.
      // `version` comes from the client: clamped, so no value overflows.
      const int64_t staleness =
          c.version - std::clamp<int64_t>(version, 0, c.version);
      ApplyLocked(c, gradient,
                  rule_.staleness_aware ? 1.0 / (staleness + 1) : 1.0);
      ready = AdvanceLocked(c);
      result = {PushOutcome::kApplied, c.version};
    } else {
      if (version < c.version) {
        return absl::AbortedError(
            absl::StrCat("variable \"", name_, "\" chunk ", chunk,
                         ": gradient computed at step ", version,
                         " is stale; the chunk is at step ", c.version,
                         " (dropped; pull again)"));
      }
      if (version > c.version) {
        return absl::InvalidArgumentError(absl::StrCat(
            "variable \"", name_, "\" chunk ", chunk, ": gradient claims step ",
            version, " but the chunk is at step ", c.version,
            "; push the version your pull returned"));
      }
      if (c.contributors.count(worker) > 0) {
        return std::make_pair(PushOutcome::kDuplicate, c.version);
      }
      if (c.aggregate_held) {
        // Step `version` is complete and only waits for a checkpoint: a
        // backup's gradient is late, exactly as if it had been applied.
        return absl::AbortedError(absl::StrCat(
            "variable \"", name_, "\" chunk ", chunk, ": step ", version,
            " already has its ", rule_.replicas_to_aggregate,
            " gradients (dropped; pull again)"));
      }
      c.contributors.insert(worker);
      if (c.sum.empty()) c.sum.assign(c.size, 0.0f);
      float* const sum = c.sum.data();
      // The mean is accumulated, each gradient scaled as it arrives: a sum
      // of finite gradients can overflow (then applied as 0), their mean
      // cannot.
      const float scale = 1.0f / rule_.replicas_to_aggregate;
      ForEachRange(
          c.size, kSumCost,
          [sum, scale, &gradient](int64_t begin, int64_t end) {
            gradient.ForEachBlock(
                begin, end,
                [sum, scale](int64_t at, absl::Span<const float> block) {
                  float* __restrict__ s = sum + at;
                  const float* __restrict__ g = block.data();
                  const int64_t n = static_cast<int64_t>(block.size());
                  for (int64_t i = 0; i < n; ++i) {
                    s[i] += scale * FiniteOrZero(g[i]);
                  }
                });
          });
      if (static_cast<int>(c.contributors.size()) <
          rule_.replicas_to_aggregate) {
        return std::make_pair(PushOutcome::kAccumulated, c.version);
      }
      c.aggregate_held = true;
      ready = ApplyAggregateLocked(c);
      result = {
          c.aggregate_held ? PushOutcome::kAccumulated : PushOutcome::kApplied,
          c.version};
    }
  }
  for (auto& callback : ready) callback();
  return result;
}

std::vector<std::function<void()>> Variable::ApplyAggregateLocked(Chunk& c) {
  if (!c.aggregate_held || c.version + 1 > c.hold_limit) return {};
  const double lr = LearningRateLocked(c, 1.0);
  const int64_t step = c.version + 1;
  const int64_t chunk_begin = c.begin;
  const absl::Span<float> sum = absl::MakeSpan(c.sum);
  // Update and reset range by range, each range still in cache (`sum`
  // holds the mean already).
  ForEachRange(c.size, apply_cost() + kSumCost,
               [&](int64_t begin, int64_t end) {
                 ApplyRange(chunk_begin, lr, step,
                            Gradient(absl::Span<const float>(sum)), begin, end);
                 std::fill(sum.begin() + begin, sum.begin() + end, 0.0f);
               });
  c.contributors.clear();
  c.aggregate_held = false;
  return AdvanceLocked(c);
}

const std::vector<std::string>& Variable::slot_names() const {
  return optimizer_->slot_names();
}

int64_t Variable::Snapshot(int chunk, absl::Span<float> values,
                           const std::vector<absl::Span<float>>& slots) const {
  const Chunk& c = *chunks_[chunk];
  MutexLock lock(&c.mu);
  std::memcpy(values.data(), values_.get() + c.begin, c.size * sizeof(float));
  for (size_t s = 0; s < slots_.size(); ++s) {
    std::memcpy(slots[s].data(), slots_[s].get() + c.begin,
                c.size * sizeof(float));
  }
  return c.version;
}

absl::Status Variable::RestoreInPlace(
    int chunk, int64_t version,
    const std::function<absl::Status(
        absl::Span<float> values, const std::vector<absl::Span<float>>& slots,
        std::vector<bool>& filled_slots)>& fill) {
  Chunk& c = *chunks_[chunk];
  std::vector<std::function<void()>> ready;
  {
    MutexLock lock(&c.mu);
    std::vector<absl::Span<float>> slots;
    for (auto& slot : slots_) {
      slots.push_back(absl::MakeSpan(slot.get() + c.begin, c.size));
    }
    std::vector<bool> filled(slots_.size(), false);
    absl::Status status =
        fill(absl::MakeSpan(values_.get() + c.begin, c.size), slots, filled);
    if (!status.ok()) return status;
    for (size_t s = 0; s < slots_.size(); ++s) {
      if (filled[s]) continue;
      std::fill_n(slots_[s].get() + c.begin, c.size,
                  optimizer_->slot_initial_value(static_cast<int>(s)));
    }
    c.sum.clear();
    c.contributors.clear();
    c.aggregate_held = false;
    c.hold_limit = kNoHold;
    c.version = version - 1;
    ready = AdvanceLocked(c);  // to `version`, waking those waiting for it
  }
  for (auto& callback : ready) callback();
  return absl::OkStatus();
}

void Variable::SetHoldLimit(int chunk, int64_t limit) {
  Chunk& c = *chunks_[chunk];
  std::vector<std::function<void()>> ready;
  {
    MutexLock lock(&c.mu);
    c.hold_limit = limit;
    ready = ApplyAggregateLocked(c);
  }
  for (auto& callback : ready) callback();
}

std::optional<uint64_t> Variable::WhenVersionReached(
    int chunk, int64_t min_version, std::function<void()> ready) {
  Chunk& c = *chunks_[chunk];
  MutexLock lock(&c.mu);
  if (c.version >= min_version) return std::nullopt;
  const uint64_t id = next_waiter_id.fetch_add(1);
  c.waiters.push_back(Waiter{id, min_version, std::move(ready)});
  return id;
}

bool Variable::CancelWait(int chunk, uint64_t id) {
  Chunk& c = *chunks_[chunk];
  MutexLock lock(&c.mu);
  auto it = std::find_if(c.waiters.begin(), c.waiters.end(),
                         [id](const Waiter& w) { return w.id == id; });
  if (it == c.waiters.end()) return false;
  c.waiters.erase(it);
  return true;
}

}  // namespace psflow
