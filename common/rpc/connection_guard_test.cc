#include "common/rpc/connection_guard.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

ConnectionGuard::Options Caps(int per_peer, int total) {
  ConnectionGuard::Options options;
  options.max_per_peer = per_peer;
  options.max_total = total;
  return options;
}

// Age is the order connections were seen in, not their socket inodes: the
// kernel numbers inodes in per-CPU batches, so an older connection can
// carry a higher inode. Here the inodes run against the ages.
TEST(ConnectionGuardTest, ThePeersNewestBeyondItsCapAreCutWhateverTheirInodes) {
  std::vector<ConnectionGuard::Seen> seen = {
      {/*inode=*/900, /*fd=*/10, "10.0.0.1", /*order=*/0},
      {/*inode=*/800, /*fd=*/11, "10.0.0.1", /*order=*/1},
      {/*inode=*/700, /*fd=*/12, "10.0.0.1", /*order=*/2},
      {/*inode=*/600, /*fd=*/13, "10.0.0.1", /*order=*/3},
      {/*inode=*/100, /*fd=*/14, "10.0.0.2", /*order=*/4},
  };
  EXPECT_THAT(ConnectionGuard::NewestBeyondCaps(seen, Caps(2, 0)),
              ElementsAre(600, 700));
  EXPECT_THAT(ConnectionGuard::NewestBeyondCaps(seen, Caps(4, 0)), IsEmpty());
}

TEST(ConnectionGuardTest, AllPeersBeyondTheTotalLoseTheirNewest) {
  std::vector<ConnectionGuard::Seen> seen = {
      {/*inode=*/5, /*fd=*/20, "10.0.0.3", /*order=*/7},
      {/*inode=*/6, /*fd=*/21, "10.0.0.1", /*order=*/2},
      {/*inode=*/7, /*fd=*/22, "10.0.0.2", /*order=*/5},
      {/*inode=*/8, /*fd=*/23, "10.0.0.1", /*order=*/1},
  };
  // The two oldest (orders 1 and 2) stay; both caps together cut each
  // connection once.
  EXPECT_THAT(ConnectionGuard::NewestBeyondCaps(seen, Caps(1, 2)),
              ElementsAre(5, 6, 7));
  EXPECT_THAT(ConnectionGuard::NewestBeyondCaps(seen, Caps(0, 0)), IsEmpty());
}

}  // namespace
}  // namespace psflow
