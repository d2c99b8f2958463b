// Hands out pieces of a client's SharedMemoryRegion to bulk calls in
// flight: first fit over a free list, neighbours merged on free. A call
// that finds no room goes over TCP instead, so the arena only needs to be
// about as large as the bytes a client keeps in flight.
//
// Thread-safe.
#ifndef PSFLOW_CLIENT_SHARED_MEMORY_ARENA_H_
#define PSFLOW_CLIENT_SHARED_MEMORY_ARENA_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"
#include "common/shared_memory_region.h"

namespace psflow {

class SharedMemoryArena {
 public:
  explicit SharedMemoryArena(std::unique_ptr<SharedMemoryRegion> region);

  // The offset (from the region's start, aligned to kSharedMemoryAlignment)
  // of `bytes` bytes now reserved for the caller, or nullopt when no free
  // piece is large enough.
  // `for_ring`: the memory of a call ring (common/shared_call_ring.h),
  // which used_bytes() leaves out: it is the region's own, not a call's.
  std::optional<int64_t> Allocate(int64_t bytes, bool for_ring = false);
  // Returns a piece Allocate handed out.
  void Free(int64_t offset);

  char* at(int64_t offset) const { return region_->base() + offset; }
  const SharedMemoryRegion& region() const { return *region_; }
  // Bytes handed out to calls and tensors and not yet freed.
  int64_t used_bytes() const;
  // Usable bytes (the region less its header).
  int64_t capacity() const {
    return region_->total_bytes() - kSharedMemoryHeaderBytes;
  }
  // Counts `bytes` of pieces that will never be freed (the owner gave up on
  // them); returns the total so far.
  int64_t CountRetired(int64_t bytes);
  // Whether the owner replaced this region by a fresh one (calls no longer
  // use it in place).
  void MarkReplaced() { replaced_.store(true, std::memory_order_release); }
  bool replaced() const { return replaced_.load(std::memory_order_acquire); }

 private:
  const std::unique_ptr<SharedMemoryRegion> region_;
  mutable Mutex mu_;
  std::map<int64_t, int64_t> free_ ABSL_GUARDED_BY(mu_);  // offset -> bytes
  std::map<int64_t, int64_t> used_ ABSL_GUARDED_BY(mu_);  // offset -> bytes
  int64_t used_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int64_t, int64_t> rings_ ABSL_GUARDED_BY(mu_);  // offset -> bytes
  int64_t retired_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<bool> replaced_{false};
};

}  // namespace psflow

#endif  // PSFLOW_CLIENT_SHARED_MEMORY_ARENA_H_
