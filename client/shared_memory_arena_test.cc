#include "client/shared_memory_arena.h"

#include <optional>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace psflow {
namespace {

constexpr int64_t kData = 4096;

SharedMemoryArena MakeArena() {
  return SharedMemoryArena(*SharedMemoryRegion::Create(kData));
}

TEST(SharedMemoryArenaTest, HandsOutAlignedDisjointPiecesPastTheHeader) {
  SharedMemoryArena arena = MakeArena();
  std::optional<int64_t> a = arena.Allocate(10);
  std::optional<int64_t> b = arena.Allocate(100);
  ASSERT_TRUE(a.has_value());
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(*a, kSharedMemoryHeaderBytes);
  EXPECT_EQ(*a % kSharedMemoryAlignment, 0);
  EXPECT_EQ(*b % kSharedMemoryAlignment, 0);
  EXPECT_GE(*b, *a + 10);
  EXPECT_EQ(arena.used_bytes(), 64 + 128);
}

TEST(SharedMemoryArenaTest, FullArenaSaysSoAndRecoversOnFree) {
  SharedMemoryArena arena = MakeArena();
  std::optional<int64_t> all = arena.Allocate(kData);
  ASSERT_TRUE(all.has_value());
  EXPECT_FALSE(arena.Allocate(1).has_value());
  EXPECT_FALSE(arena.Allocate(kData + 1).has_value());
  arena.Free(*all);
  EXPECT_EQ(arena.used_bytes(), 0);
  EXPECT_TRUE(arena.Allocate(kData).has_value());
}

TEST(SharedMemoryArenaTest, FreedNeighboursMergeBackIntoOnePiece) {
  SharedMemoryArena arena = MakeArena();
  std::vector<int64_t> pieces;
  for (int i = 0; i < 4; ++i) pieces.push_back(*arena.Allocate(kData / 4));
  EXPECT_FALSE(arena.Allocate(1).has_value());
  // Free out of order: middle, ends, then the last gap.
  arena.Free(pieces[1]);
  arena.Free(pieces[3]);
  arena.Free(pieces[0]);
  EXPECT_FALSE(arena.Allocate(kData).has_value());  // pieces[2] still held
  arena.Free(pieces[2]);
  EXPECT_EQ(arena.Allocate(kData), kSharedMemoryHeaderBytes);
}

TEST(SharedMemoryArenaTest, RandomChurnNeverOverlapsOrLeaks) {
  SharedMemoryArena arena = MakeArena();
  std::mt19937 random(7);
  std::vector<std::pair<int64_t, int64_t>> held;  // offset, bytes
  for (int round = 0; round < 2000; ++round) {
    if (!held.empty() && random() % 2 == 0) {
      const size_t i = random() % held.size();
      arena.Free(held[i].first);
      held.erase(held.begin() + static_cast<long>(i));
      continue;
    }
    const int64_t bytes = 1 + static_cast<int64_t>(random() % 700);
    std::optional<int64_t> offset = arena.Allocate(bytes);
    if (!offset.has_value()) continue;
    EXPECT_GE(*offset, kSharedMemoryHeaderBytes);
    EXPECT_LE(*offset + bytes, kSharedMemoryHeaderBytes + kData);
    for (const auto& [other, other_bytes] : held) {
      EXPECT_TRUE(*offset + bytes <= other || other + other_bytes <= *offset)
          << "overlap at " << *offset;
    }
    held.emplace_back(*offset, bytes);
  }
  for (const auto& piece : held) arena.Free(piece.first);
  EXPECT_EQ(arena.used_bytes(), 0);
  EXPECT_TRUE(arena.Allocate(kData).has_value());
}

}  // namespace
}  // namespace psflow
