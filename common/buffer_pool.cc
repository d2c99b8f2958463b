#include "common/buffer_pool.h"

#include <cstdlib>
#include <new>

namespace psflow {
namespace {

constexpr size_t kAlignment = 64;

float* AllocateAligned(size_t floats) {
  size_t bytes =
      (floats * sizeof(float) + kAlignment - 1) / kAlignment * kAlignment;
  if (bytes == 0) bytes = kAlignment;
  void* p = std::aligned_alloc(kAlignment, bytes);
  if (p == nullptr) throw std::bad_alloc();
  return static_cast<float*>(p);
}

}  // namespace

std::shared_ptr<BufferPool> BufferPool::Create(size_t max_cached_bytes) {
  return std::shared_ptr<BufferPool>(new BufferPool(max_cached_bytes));
}

BufferPool::~BufferPool() {
  for (auto& [data, floats] : idle_) std::free(data);
}

std::shared_ptr<PooledBuffer> BufferPool::Acquire(size_t floats) {
  float* data = nullptr;
  {
    MutexLock lock(&mu_);
    for (size_t i = 0; i < idle_.size(); ++i) {
      if (idle_[i].second == floats) {
        data = idle_[i].first;
        idle_[i] = idle_.back();
        idle_.pop_back();
        cached_bytes_ -= floats * sizeof(float);
        break;
      }
    }
  }
  if (data == nullptr) data = AllocateAligned(floats);
  std::weak_ptr<BufferPool> weak_pool = weak_from_this();
  return std::shared_ptr<PooledBuffer>(
      new PooledBuffer(data, floats), [weak_pool](PooledBuffer* buffer) {
        if (auto pool = weak_pool.lock()) {
          pool->Release(buffer->data(), buffer->size());
        } else {
          std::free(buffer->data());
        }
        delete buffer;
      });
}

void BufferPool::Release(float* data, size_t floats) {
  {
    MutexLock lock(&mu_);
    if (cached_bytes_ + floats * sizeof(float) <= max_cached_bytes_) {
      idle_.emplace_back(data, floats);
      cached_bytes_ += floats * sizeof(float);
      return;
    }
  }
  std::free(data);
}

size_t BufferPool::cached_bytes() const {
  MutexLock lock(&mu_);
  return cached_bytes_;
}

}  // namespace psflow
