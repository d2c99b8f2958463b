#include "common/job/row_placement.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace psflow {
namespace {

TEST(RowPlacementTest, EveryIdHasOneServerInRange) {
  for (int servers : {1, 2, 3, 7, 64}) {
    for (int64_t id : {int64_t{0}, int64_t{1}, int64_t{-1}, INT64_MAX,
                       INT64_MIN, int64_t{1} << 48}) {
      const int server = RowServer(id, servers);
      EXPECT_GE(server, 0);
      EXPECT_LT(server, servers);
      EXPECT_EQ(server, RowServer(id, servers)) << "must not vary";
    }
  }
}

// The value is part of the checkpoint format's meaning (a restore keeps
// the rows it owns): it must never change between releases.
TEST(RowPlacementTest, TheHashIsFixed) {
  EXPECT_EQ(RowServer(0, 1000), RowServer(0, 1000));
  EXPECT_EQ(RowHash(12345), RowHash(12345));
  EXPECT_NE(RowHash(1), RowHash(2));
  EXPECT_EQ(RowHash(0), 0x492b8d6066c09227ull);
}

TEST(RowPlacementTest, SequentialIdsSpreadEvenly) {
  constexpr int kServers = 3;
  constexpr int kIds = 300000;
  std::vector<int> count(kServers);
  for (int64_t id = 0; id < kIds; ++id) ++count[RowServer(id, kServers)];
  for (int c : count) {
    EXPECT_NEAR(c, kIds / kServers, kIds / kServers / 50) << "within 2%";
  }
}

}  // namespace
}  // namespace psflow
