// An open-addressing hash map from int64 row ids to 32-bit row numbers,
// with linear probing and backward-shift deletion (no tombstones), kept at
// most 70% full. It is the per-stripe index of an embedding table: 12 bytes
// per slot, about 17 bytes per row, where a std::unordered_map node costs
// over 40.
//
// Ids come from clients, so the slot an id starts from is keyed with a
// random per-index key: with a fixed hash, a client could pick ids that
// all share one home slot and make every insert and lookup scan all of
// them under the stripe lock (hash flooding).
//
// Thread-compatible: the table's stripe lock guards it.
#ifndef PSFLOW_PS_ROW_INDEX_H_
#define PSFLOW_PS_ROW_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "common/prefetch.h"
#include "common/splitmix64.h"

namespace psflow {

class RowIndex {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  RowIndex();

  // The row of `id`, or kNone.
  uint32_t Find(int64_t id) const;

  // Asks the CPU to bring the slot where a lookup of `id` starts into the
  // cache: a caller that prefetches a few ids ahead of their Find()s
  // overlaps their cache misses (an index far larger than the cache misses
  // on nearly every lookup). A hint only; changes nothing.
  void Prefetch(int64_t id) const {
    const size_t i = Home(id);
    PrefetchForRead(ids_.data() + i);
    PrefetchForRead(rows_.data() + i);
  }

  // Maps an id that is not present to `row` (not kNone).
  void Insert(int64_t id, uint32_t row);

  // Removes `id`; returns its row, or kNone when it was not present.
  uint32_t Erase(int64_t id);

  int64_t size() const { return size_; }
  // Bytes held by the slots.
  int64_t bytes() const {
    return static_cast<int64_t>(ids_.capacity() * sizeof(int64_t) +
                                rows_.capacity() * sizeof(uint32_t));
  }

  // Every (id, row), in no particular order.
  std::vector<std::pair<int64_t, uint32_t>> Entries() const;

  // The slot a lookup of `id` starts from (diagnostics and tests).
  size_t HomeSlot(int64_t id) const { return Home(id); }

  void Clear();

 private:
  void Grow();
  // Keyed (see above), and so independent of the hash that picks the
  // server and the stripe (common/job/row_placement.h): every slot is
  // used. Two rounds, so that no fixed difference of ids survives the key.
  size_t Home(int64_t id) const {
    return SplitMix64Mix(SplitMix64Mix(static_cast<uint64_t>(id) ^ key_[0]) +
                         key_[1]) &
           mask_;
  }

  uint64_t key_[2];
  std::vector<int64_t> ids_;
  std::vector<uint32_t> rows_;  // kNone: empty slot
  uint64_t mask_ = 0;
  int64_t size_ = 0;
};

}  // namespace psflow

#endif  // PSFLOW_PS_ROW_INDEX_H_
