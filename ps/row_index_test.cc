#include "ps/row_index.h"

#include <cstdint>
#include <random>
#include <set>
#include <unordered_map>

#include "common/splitmix64.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

TEST(RowIndexTest, FindsWhatWasInserted) {
  RowIndex index;
  EXPECT_EQ(index.Find(7), RowIndex::kNone);
  index.Insert(7, 70);
  index.Insert(-3, 30);
  index.Insert(INT64_MIN, 1);
  EXPECT_EQ(index.Find(7), 70u);
  EXPECT_EQ(index.Find(-3), 30u);
  EXPECT_EQ(index.Find(INT64_MIN), 1u);
  EXPECT_EQ(index.Find(8), RowIndex::kNone);
  EXPECT_EQ(index.size(), 3);
}

// Random inserts and erases against std::unordered_map, through many
// growths and long probe runs: every erase must keep every other entry
// findable (backward shift).
TEST(RowIndexTest, AgreesWithAReferenceMapUnderChurn) {
  RowIndex index;
  std::unordered_map<int64_t, uint32_t> reference;
  std::mt19937_64 random(42);
  for (int op = 0; op < 200000; ++op) {
    // A small id space so erases hit and probe runs collide.
    const int64_t id = static_cast<int64_t>(random() % 5000) - 2500;
    if (random() % 3 == 0) {
      const auto it = reference.find(id);
      const uint32_t expected =
          it == reference.end() ? RowIndex::kNone : it->second;
      ASSERT_EQ(index.Erase(id), expected) << "op " << op;
      if (it != reference.end()) reference.erase(it);
    } else if (reference.count(id) == 0) {
      const uint32_t row = static_cast<uint32_t>(op);
      index.Insert(id, row);
      reference[id] = row;
    }
    if (op % 997 == 0) {
      for (const auto& [key, row] : reference) {
        ASSERT_EQ(index.Find(key), row) << "op " << op << " id " << key;
      }
    }
  }
  EXPECT_EQ(index.size(), static_cast<int64_t>(reference.size()));
  const auto entries = index.Entries();
  EXPECT_EQ(static_cast<int64_t>(entries.size()), index.size());
  for (const auto& [id, row] : entries) EXPECT_EQ(reference.at(id), row);
}

// SplitMix64Mix's inverse: undoes each xor-shift and multiply.
uint64_t UnMix(uint64_t z) {
  auto unshift = [](uint64_t y, int s) {
    uint64_t x = y;
    for (int i = 0; i < 64 / s + 1; ++i) x = y ^ (x >> s);
    return x;
  };
  auto inverse = [](uint64_t c) {  // c odd: Newton's iteration mod 2^64
    uint64_t x = c;
    for (int i = 0; i < 6; ++i) x *= 2 - c * x;
    return x;
  };
  z = unshift(z, 31);
  z *= inverse(0x94d049bb133111ebull);
  z = unshift(z, 27);
  z *= inverse(0xbf58476d1ce4e5b9ull);
  return unshift(z, 30);
}

// Ids a client chose so that a fixed, known hash (the one this index used
// to have) sends them all to slot 0: with the key they spread like any.
TEST(RowIndexTest, ChosenIdsDoNotShareAHomeSlot) {
  ASSERT_EQ(SplitMix64Mix(UnMix(0x123456789abcdefull)), 0x123456789abcdefull);
  constexpr uint64_t kOldOffset = 0x3c6ef372fe94f82bull;
  RowIndex index;
  std::vector<int64_t> ids;
  for (uint64_t k = 1; k <= 2000; ++k) {
    ids.push_back(static_cast<int64_t>(UnMix(k << 40) - kOldOffset));
    index.Insert(ids.back(), static_cast<uint32_t>(k));
  }
  std::set<size_t> homes;
  for (int64_t id : ids) homes.insert(index.HomeSlot(id));
  // 2000 ids in 4096 slots: about 1570 distinct homes when spread.
  EXPECT_GT(homes.size(), 1200u);
  for (size_t k = 0; k < ids.size(); ++k) {
    ASSERT_EQ(index.Find(ids[k]), static_cast<uint32_t>(k + 1));
  }
  // And the key is the index's own: another index starts elsewhere.
  RowIndex other;
  int same = 0;
  for (int64_t id = 0; id < 64; ++id) {
    same += other.HomeSlot(id) == RowIndex().HomeSlot(id);
  }
  EXPECT_LT(same, 16);
}

TEST(RowIndexTest, ClearEmptiesAndShrinks) {
  RowIndex index;
  for (int64_t id = 0; id < 10000; ++id) index.Insert(id, 1);
  const int64_t grown = index.bytes();
  index.Clear();
  EXPECT_EQ(index.size(), 0);
  EXPECT_EQ(index.Find(5), RowIndex::kNone);
  EXPECT_LT(index.bytes(), grown / 100);
  // About 12 bytes per slot at most 70% full.
  EXPECT_LT(grown, 10000 * 12 * 4);
}

}  // namespace
}  // namespace psflow
