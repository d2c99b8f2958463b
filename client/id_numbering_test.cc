#include "client/id_numbering.h"

#include <cstdint>
#include <limits>
#include <random>
#include <unordered_map>
#include <vector>

#include "gtest/gtest.h"

namespace psflow {

class IdNumberingPeer {
 public:
  static void SetStamp(IdNumbering& numbering, uint32_t stamp) {
    numbering.stamp_ = stamp;
  }
  static size_t Slots(const IdNumbering& numbering) {
    return numbering.slots_.size();
  }
};

namespace {

// What IdNumbering must answer, from a std::unordered_map.
class Oracle {
 public:
  int32_t Add(int64_t id) {
    auto [it, added] = numbers_.try_emplace(id, next_);
    if (added) ++next_;
    return it->second;
  }
  void Reset() {
    numbers_.clear();
    next_ = 0;
  }

 private:
  std::unordered_map<int64_t, int32_t> numbers_;
  int32_t next_ = 0;
};

TEST(IdNumberingTest, NumbersIdsInTheOrderTheyFirstAppear) {
  IdNumbering numbering;
  numbering.Reset(8);
  EXPECT_EQ(numbering.Add(42), 0);
  EXPECT_EQ(numbering.Add(-7), 1);
  EXPECT_EQ(numbering.Add(42), 0);
  EXPECT_EQ(numbering.Add(0), 2);
  EXPECT_EQ(numbering.Add(-7), 1);
  EXPECT_EQ(numbering.size(), 3);
}

TEST(IdNumberingTest, ExtremeIdsAreIdsLikeAnyOther) {
  IdNumbering numbering;
  numbering.Reset(4);
  const int64_t lowest = std::numeric_limits<int64_t>::min();
  const int64_t highest = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(numbering.Add(lowest), 0);
  EXPECT_EQ(numbering.Add(highest), 1);
  EXPECT_EQ(numbering.Add(0), 2);
  EXPECT_EQ(numbering.Add(lowest), 0);
  EXPECT_EQ(numbering.Add(highest), 1);
}

TEST(IdNumberingTest, ResetForgetsEveryId) {
  IdNumbering numbering;
  numbering.Reset(4);
  numbering.Add(5);
  numbering.Add(6);
  numbering.Reset(4);
  EXPECT_EQ(numbering.size(), 0);
  EXPECT_EQ(numbering.Add(6), 0);
  EXPECT_EQ(numbering.Add(5), 1);
}

TEST(IdNumberingTest, GrowsPastItsHintKeepingTheNumbers) {
  IdNumbering numbering;
  numbering.Reset(1);
  const size_t slots = IdNumberingPeer::Slots(numbering);
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 10000; ++i) ids.push_back(i * 1000003 - 5000000);
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_EQ(numbering.Add(ids[i]), static_cast<int32_t>(i));
  }
  EXPECT_GT(IdNumberingPeer::Slots(numbering), slots);
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_EQ(numbering.Add(ids[i]), static_cast<int32_t>(i));
  }
  EXPECT_EQ(numbering.size(), 10000);
}

TEST(IdNumberingTest, AgreesWithAHashMapOverManyBatches) {
  IdNumbering numbering;
  Oracle oracle;
  std::mt19937_64 random(7);
  for (int batch = 0; batch < 200; ++batch) {
    // Batches of varying size, ids from small ranges (many repeats),
    // sequential runs and anywhere in int64.
    const int n = static_cast<int>(random() % 5000);
    numbering.Reset(batch % 3 == 0 ? n : n / 4);
    oracle.Reset();
    for (int k = 0; k < n; ++k) {
      int64_t id;
      switch (random() % 3) {
        case 0:
          id = static_cast<int64_t>(random() % 300);
          break;
        case 1:
          id = (int64_t{batch} << 48) + k;
          break;
        default:
          id = static_cast<int64_t>(random());
      }
      ASSERT_EQ(numbering.Add(id), oracle.Add(id))
          << "batch " << batch << ", id " << k;
    }
  }
}

TEST(IdNumberingTest, TheStampWrappingAroundForgetsOldIds) {
  IdNumbering numbering;  // at the first stamp
  numbering.Add(1);
  numbering.Add(2);
  // The next Reset() takes the stamp past UINT32_MAX and back to the
  // first, where the slots of 1 and 2 would look current again.
  IdNumberingPeer::SetStamp(numbering, UINT32_MAX);
  numbering.Add(3);
  numbering.Reset(4);
  EXPECT_EQ(numbering.Add(2), 0);
  EXPECT_EQ(numbering.Add(3), 1);
  EXPECT_EQ(numbering.Add(1), 2);
  EXPECT_EQ(numbering.size(), 3);
}

}  // namespace
}  // namespace psflow
