#include "common/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>
#include <utility>
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

// Outside the ephemeral range no outgoing connection can take a port
// between the pick and the server's bind.
TEST(FreePortTest, PortsComeFromOutsideTheEphemeralRange) {
  const auto [low, high] = EphemeralPortRange();
  if (ServerPortRanges(low, high).empty()) {
    GTEST_SKIP() << "this host's ephemeral range " << low << "-" << high
                 << " leaves too few other ports";
  }
  ASSERT_OK_AND_ASSIGN(std::vector<int> ports, PickFreePorts(50));
  for (int port : ports) {
    EXPECT_TRUE(port < low || port > high) << port;
    EXPECT_GE(port, 10000);
  }
}

TEST(FreePortTest, APickedPortCanBeBoundAtOnce) {
  ASSERT_OK_AND_ASSIGN(int port, PickFreePort());
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  close(fd);
}

TEST(FreePortTest, TheRangesLeaveOutTheEphemeralOnes) {
  using Ranges = std::vector<std::pair<int, int>>;
  EXPECT_EQ(ServerPortRanges(32768, 60999),
            (Ranges{{10000, 32767}, {61000, 65535}}));
  EXPECT_EQ(ServerPortRanges(40000, 65535), (Ranges{{10000, 39999}}));
  EXPECT_EQ(ServerPortRanges(1024, 9000), (Ranges{{10000, 65535}}));
  // Too little room left: the kernel chooses.
  EXPECT_EQ(ServerPortRanges(1024, 65535), Ranges{});
  EXPECT_EQ(ServerPortRanges(10200, 65200), Ranges{});
}

TEST(FreePortTest, ABadCountIsRefused) {
  EXPECT_THAT(PickFreePorts(-1), StatusIs(absl::StatusCode::kInvalidArgument,
                                          ::testing::HasSubstr("0 to 4096")));
  ASSERT_OK_AND_ASSIGN(std::vector<int> none, PickFreePorts(0));
  EXPECT_TRUE(none.empty());
}

}  // namespace
}  // namespace psflow
