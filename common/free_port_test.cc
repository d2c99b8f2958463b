#include "common/free_port.h"

#include <set>
#include <vector>

#include "common/status_matchers.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

TEST(FreePortTest, PicksAPort) {
  ASSERT_OK_AND_ASSIGN(int port, PickFreePort());
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
}

// Chosen one at a time and released at once, ports can repeat; held until
// all are chosen they cannot.
TEST(FreePortTest, ManyPortsAreAllDistinct) {
  ASSERT_OK_AND_ASSIGN(std::vector<int> ports, PickFreePorts(200));
  ASSERT_EQ(ports.size(), 200);
  EXPECT_EQ(std::set<int>(ports.begin(), ports.end()).size(), 200);
}

TEST(FreePortTest, ABadCountIsRefused) {
  EXPECT_THAT(PickFreePorts(-1), StatusIs(absl::StatusCode::kInvalidArgument,
                                          ::testing::HasSubstr("0 to 4096")));
  ASSERT_OK_AND_ASSIGN(std::vector<int> none, PickFreePorts(0));
  EXPECT_TRUE(none.empty());
}

}  // namespace
}  // namespace psflow
