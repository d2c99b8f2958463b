#include "client/shared_memory_arena.h"

#include <utility>

#include "common/logging.h"

namespace psflow {

SharedMemoryArena::SharedMemoryArena(std::unique_ptr<SharedMemoryRegion> region)
    : region_(std::move(region)) {
  free_[kSharedMemoryHeaderBytes] =
      region_->total_bytes() - kSharedMemoryHeaderBytes;
}

std::optional<int64_t> SharedMemoryArena::Allocate(int64_t bytes,
                                                   bool for_ring) {
  if (bytes <= 0) return std::nullopt;
  const int64_t rounded = (bytes + kSharedMemoryAlignment - 1) /
                          kSharedMemoryAlignment * kSharedMemoryAlignment;
  MutexLock lock(&mu_);
  // First fit keeps pieces near the start, so few pages are ever touched.
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < rounded) continue;
    const int64_t offset = it->first;
    const int64_t left = it->second - rounded;
    free_.erase(it);
    if (left > 0) free_[offset + rounded] = left;
    used_[offset] = rounded;
    if (for_ring) {
      rings_[offset] = rounded;
    } else {
      used_bytes_ += rounded;
    }
    return offset;
  }
  return std::nullopt;
}

void SharedMemoryArena::Free(int64_t offset) {
  MutexLock lock(&mu_);
  auto used = used_.find(offset);
  CHECK(used != used_.end())
      << "freeing shared memory at " << offset << ", which is not allocated";
  int64_t start = offset;
  int64_t bytes = used->second;
  if (rings_.erase(offset) == 0) used_bytes_ -= bytes;
  used_.erase(used);
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == start + bytes) {
    bytes += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == start) {
      start = previous->first;
      bytes += previous->second;
      free_.erase(previous);
    }
  }
  free_[start] = bytes;
}

int64_t SharedMemoryArena::CountRetired(int64_t bytes) {
  MutexLock lock(&mu_);
  retired_bytes_ += bytes;
  return retired_bytes_;
}

int64_t SharedMemoryArena::used_bytes() const {
  MutexLock lock(&mu_);
  return used_bytes_;
}

}  // namespace psflow
