#include "common/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace psflow {
namespace {

// A socket bound to a kernel-chosen port on 127.0.0.1; -1 on error (and
// `error` set).
int BindAnyPort(int& port, absl::Status& error) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    error =
        absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
    return -1;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int saved = errno;
    close(fd);
    error = absl::UnavailableError(
        absl::StrCat("cannot find a free port: ", std::strerror(saved)));
    return -1;
  }
  port = ntohs(addr.sin_port);
  return fd;
}

}  // namespace

absl::StatusOr<int> PickFreePort() {
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(1);
  if (!ports.ok()) return ports.status();
  return (*ports)[0];
}

absl::StatusOr<std::vector<int>> PickFreePorts(int count) {
  if (count < 0 || count > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("asked for ", count, " free ports; 0 to 4096"));
  }
  // Every socket stays bound until all are chosen, so the kernel never
  // hands out one port twice.
  std::vector<int> fds;
  std::vector<int> ports;
  absl::Status error;
  for (int i = 0; i < count && error.ok(); ++i) {
    int port = 0;
    const int fd = BindAnyPort(port, error);
    if (fd < 0) break;
    fds.push_back(fd);
    ports.push_back(port);
  }
  for (int fd : fds) close(fd);
  if (!error.ok()) return error;
  return ports;
}

}  // namespace psflow
