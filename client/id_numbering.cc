#include "client/id_numbering.h"

#include <utility>

namespace psflow {

IdNumbering::IdNumbering() { Allocate(16); }

void IdNumbering::Allocate(size_t ids) {
  size_t slots = 32;
  int bits = 5;
  while (slots < 2 * ids) {
    slots *= 2;
    ++bits;
  }
  slots_.assign(slots, Slot{0, 0, 0});
  mask_ = slots - 1;
  shift_ = 64 - bits;
  max_size_ = static_cast<int32_t>(slots / 2);
  stamp_ = 1;
  size_ = 0;
}

void IdNumbering::Reset(size_t expected_ids) {
  if (2 * expected_ids > slots_.size()) {
    Allocate(expected_ids);
    return;
  }
  size_ = 0;
  if (++stamp_ == 0) {
    // After 2^32 - 1 generations: every slot written again as empty.
    slots_.assign(slots_.size(), Slot{0, 0, 0});
    stamp_ = 1;
  }
}

void IdNumbering::Grow() {
  std::vector<Slot> old = std::move(slots_);
  const uint32_t old_stamp = stamp_;
  const int32_t old_size = size_;
  Allocate(old.size());  // twice the slots: room for old.size() ids
  for (const Slot& slot : old) {
    if (slot.stamp != old_stamp) continue;
    size_t i = Home(slot.id);
    while (slots_[i].stamp == stamp_) i = (i + 1) & mask_;
    slots_[i] = Slot{slot.id, slot.number, stamp_};
  }
  size_ = old_size;
}

}  // namespace psflow
