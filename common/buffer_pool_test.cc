#include "common/buffer_pool.h"

#include <cstdint>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace psflow {
namespace {

TEST(BufferPoolTest, ReleasedBuffersAreReused) {
  auto pool = BufferPool::Create(1 << 20);
  float* first = nullptr;
  {
    auto buffer = pool->Acquire(1000);
    first = buffer->data();
    EXPECT_EQ(buffer->size(), 1000u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
  }
  EXPECT_EQ(pool->cached_bytes(), 4000u);
  auto again = pool->Acquire(1000);
  EXPECT_EQ(again->data(), first);
  EXPECT_EQ(pool->cached_bytes(), 0u);
}

TEST(BufferPoolTest, OnlySameSizedBuffersAreReused) {
  auto pool = BufferPool::Create(1 << 20);
  { auto buffer = pool->Acquire(1000); }
  auto other = pool->Acquire(500);
  EXPECT_EQ(other->size(), 500u);
  EXPECT_EQ(pool->cached_bytes(), 4000u);
}

TEST(BufferPoolTest, CacheIsBounded) {
  auto pool = BufferPool::Create(6000);
  {
    auto a = pool->Acquire(1000);
    auto b = pool->Acquire(1000);
  }
  EXPECT_EQ(pool->cached_bytes(), 4000u);
}

TEST(BufferPoolTest, BuffersMayOutliveThePool) {
  auto pool = BufferPool::Create(1 << 20);
  auto buffer = pool->Acquire(10);
  pool.reset();
  buffer->data()[9] = 1.0f;  // Still valid; freed when dropped.
  buffer.reset();
}

TEST(BufferPoolTest, ConcurrentUseIsSafe) {
  auto pool = BufferPool::Create(1 << 20);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pool, t] {
      for (int i = 0; i < 1000; ++i) {
        auto buffer = pool->Acquire(256);
        for (size_t j = 0; j < buffer->size(); ++j) buffer->data()[j] = t;
        for (size_t j = 0; j < buffer->size(); ++j) {
          ASSERT_EQ(buffer->data()[j], t);
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
}

}  // namespace
}  // namespace psflow
