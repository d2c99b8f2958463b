#include "common/port_probe.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

// A listening socket on a free loopback port; its port.
int Listen(int& fd) {
  fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)),
            0);
  EXPECT_EQ(listen(fd, 4), 0);
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  return ntohs(address.sin_port);
}

TEST(PortProbeTest, RefusedOnlyWhenNothingListens) {
  int fd = -1;
  const int port = Listen(fd);
  const std::string address = absl::StrCat("127.0.0.1:", port);
  EXPECT_FALSE(ConnectionRefused(address, absl::Seconds(5)));
  close(fd);  // nothing listens there now
  EXPECT_TRUE(ConnectionRefused(address, absl::Seconds(5)));
  // Nothing proves a server gone that cannot be asked.
  EXPECT_FALSE(
      ConnectionRefused("no-such-host.invalid:1234", absl::Seconds(5)));
  EXPECT_FALSE(ConnectionRefused("not an address", absl::Seconds(5)));
}

}  // namespace
}  // namespace psflow
