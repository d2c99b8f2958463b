// Numbers the distinct ids of a batch in the order they first appear
// (0, 1, 2, ...): the slots of client/batch_rows.h. An open-addressing
// hash table (linear probing, at most half full) kept from batch to
// batch: Reset() forgets every id in O(1) by moving to a new generation
// stamp, so a batch costs neither an allocation nor clearing a table, as
// a hash map built per batch does.
//
// Thread-compatible.
#ifndef PSFLOW_CLIENT_ID_NUMBERING_H_
#define PSFLOW_CLIENT_ID_NUMBERING_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace psflow {

class IdNumbering {
 public:
  // Empty, as after a Reset().
  IdNumbering();

  // Forgets every id, making room for `expected_ids` distinct ones (a
  // hint: the table grows when more come).
  void Reset(size_t expected_ids);

  // The number of `id` since the last Reset(): the one it was given when
  // first added, or size() (before this call) when it is new.
  int32_t Add(int64_t id) {
    for (size_t i = Home(id);; i = (i + 1) & mask_) {
      Slot& slot = slots_[i];
      if (slot.stamp != stamp_) {
        if (size_ >= max_size_) {
          Grow();
          return Add(id);
        }
        slot = Slot{id, size_, stamp_};
        return size_++;
      }
      if (slot.id == id) return slot.number;
    }
  }

  // Distinct ids added since the last Reset().
  int32_t size() const { return size_; }

 private:
  friend class IdNumberingPeer;  // tests: the stamp's wrap-around

  struct Slot {
    int64_t id;
    int32_t number;
    uint32_t stamp;  // the generation that wrote the slot; else empty
  };

  // Fibonacci hashing: the high bits of id * 2^64 / phi, which depend on
  // every bit of the id (sequential ids and the CTR ids' field bits both
  // spread).
  size_t Home(int64_t id) const {
    return static_cast<size_t>(
        (static_cast<uint64_t>(id) * 0x9e3779b97f4a7c15ull) >> shift_);
  }
  // Makes room for at least `ids` distinct ids; forgets every id.
  void Allocate(size_t ids);
  // Doubles the table, keeping the ids and their numbers.
  void Grow();

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 64;
  int32_t max_size_ = 0;  // half the slots
  uint32_t stamp_ = 1;    // slots start at stamp 0: empty
  int32_t size_ = 0;
};

}  // namespace psflow

#endif  // PSFLOW_CLIENT_ID_NUMBERING_H_
