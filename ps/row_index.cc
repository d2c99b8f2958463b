#include "ps/row_index.h"

#include <atomic>
#include <random>
#include <utility>

namespace psflow {
namespace {

constexpr size_t kInitialSlots = 64;

// A fresh key per index from one random seed per process: keys differ
// between indexes and between runs, and cost no system call after the
// first.
uint64_t FreshKey() {
  static std::atomic<uint64_t> state{[] {
    std::random_device device;
    return (uint64_t{device()} << 32) ^ device();
  }()};
  return SplitMix64Mix(state.fetch_add(0x9e3779b97f4a7c15ull));
}

}  // namespace

RowIndex::RowIndex()
    : key_{FreshKey(), FreshKey()},
      ids_(kInitialSlots),
      rows_(kInitialSlots, kNone),
      mask_(kInitialSlots - 1) {}

uint32_t RowIndex::Find(int64_t id) const {
  for (size_t i = Home(id);; i = (i + 1) & mask_) {
    if (rows_[i] == kNone) return kNone;
    if (ids_[i] == id) return rows_[i];
  }
}

void RowIndex::Insert(int64_t id, uint32_t row) {
  if ((size_ + 1) * 10 > static_cast<int64_t>(rows_.size()) * 7) Grow();
  size_t i = Home(id);
  while (rows_[i] != kNone) i = (i + 1) & mask_;
  ids_[i] = id;
  rows_[i] = row;
  ++size_;
}

uint32_t RowIndex::Erase(int64_t id) {
  size_t i = Home(id);
  while (rows_[i] != kNone && ids_[i] != id) i = (i + 1) & mask_;
  if (rows_[i] == kNone) return kNone;
  const uint32_t row = rows_[i];
  // Backward shift: move later entries of the probe run into the hole
  // where their home allows, so a lookup never meets an empty slot before
  // its entry.
  size_t hole = i;
  for (size_t j = (i + 1) & mask_; rows_[j] != kNone; j = (j + 1) & mask_) {
    const size_t home = Home(ids_[j]);
    // Entry j stays when its home lies cyclically in (hole, j].
    const bool stays =
        hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
    if (stays) continue;
    ids_[hole] = ids_[j];
    rows_[hole] = rows_[j];
    hole = j;
  }
  rows_[hole] = kNone;
  --size_;
  return row;
}

void RowIndex::Grow() {
  std::vector<int64_t> old_ids = std::move(ids_);
  std::vector<uint32_t> old_rows = std::move(rows_);
  const size_t slots = old_rows.size() * 2;
  ids_.assign(slots, 0);
  rows_.assign(slots, kNone);
  mask_ = slots - 1;
  for (size_t i = 0; i < old_rows.size(); ++i) {
    if (old_rows[i] == kNone) continue;
    size_t j = Home(old_ids[i]);
    while (rows_[j] != kNone) j = (j + 1) & mask_;
    ids_[j] = old_ids[i];
    rows_[j] = old_rows[i];
  }
}

std::vector<std::pair<int64_t, uint32_t>> RowIndex::Entries() const {
  std::vector<std::pair<int64_t, uint32_t>> entries;
  entries.reserve(size_);
  for (size_t i = 0; i < rows_.size(); ++i) {
    if (rows_[i] != kNone) entries.emplace_back(ids_[i], rows_[i]);
  }
  return entries;
}

void RowIndex::Clear() {
  std::vector<int64_t>(kInitialSlots).swap(ids_);
  std::vector<uint32_t>(kInitialSlots, kNone).swap(rows_);
  mask_ = kInitialSlots - 1;
  size_ = 0;
}

}  // namespace psflow
