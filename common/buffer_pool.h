// A pool of float buffers reused across RPCs.
//
// Freshly allocated memory is slow to touch the first time (page faults
// run at about 2 GB/s on these machines, slower than loopback TCP), so the
// transport recycles its chunk buffers instead of allocating per request.
// A buffer returns to the pool when its last shared_ptr is dropped, even
// after the pool itself is gone.
//
// Thread-safe.
#ifndef PSFLOW_COMMON_BUFFER_POOL_H_
#define PSFLOW_COMMON_BUFFER_POOL_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/types/span.h"
#include "common/mutex.h"

namespace psflow {

// A buffer of `size()` floats, 64-byte aligned. Contents are unspecified
// when acquired.
class PooledBuffer {
 public:
  float* data() const { return data_; }
  size_t size() const { return size_; }
  absl::Span<float> span() const { return absl::MakeSpan(data_, size_); }

 private:
  friend class BufferPool;
  PooledBuffer(float* data, size_t size) : data_(data), size_(size) {}
  float* data_;
  size_t size_;
};

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  // Keeps at most `max_cached_bytes` of idle buffers.
  static std::shared_ptr<BufferPool> Create(size_t max_cached_bytes);

  // A buffer of exactly `floats` elements, recycled when one is idle.
  std::shared_ptr<PooledBuffer> Acquire(size_t floats);

  // Idle bytes held now (for tests and stats).
  size_t cached_bytes() const;

  ~BufferPool();

 private:
  explicit BufferPool(size_t max_cached_bytes)
      : max_cached_bytes_(max_cached_bytes) {}
  void Release(float* data, size_t floats);

  const size_t max_cached_bytes_;
  mutable Mutex mu_;
  // Idle buffers by size, each (pointer, floats).
  std::vector<std::pair<float*, size_t>> idle_ ABSL_GUARDED_BY(mu_);
  size_t cached_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace psflow

#endif  // PSFLOW_COMMON_BUFFER_POOL_H_
