#include "common/port_probe.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "common/host_port.h"

namespace psflow {
namespace {

// ECONNREFUSED, 0 when it connected, another errno otherwise.
int TryConnect(const addrinfo& ai, absl::Duration timeout) {
  const int fd =
      socket(ai.ai_family, ai.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
             ai.ai_protocol);
  if (fd < 0) return errno;
  int result = 0;
  if (connect(fd, ai.ai_addr, ai.ai_addrlen) != 0) {
    result = errno;
    if (result == EINPROGRESS) {
      pollfd p = {fd, POLLOUT, 0};
      const int ready =
          poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout)));
      if (ready <= 0) {
        result = ETIMEDOUT;
      } else {
        socklen_t length = sizeof(result);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &result, &length) != 0) {
          result = errno;
        }
      }
    }
  }
  close(fd);
  return result;
}

}  // namespace

bool ConnectionRefused(const std::string& address, absl::Duration timeout) {
  absl::StatusOr<HostPort> parsed = ParseHostPort(address);
  if (!parsed.ok() || parsed->port <= 0) return false;
  addrinfo hints = {};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_family = AF_UNSPEC;
  addrinfo* found = nullptr;
  if (getaddrinfo(parsed->host.c_str(), std::to_string(parsed->port).c_str(),
                  &hints, &found) != 0 ||
      found == nullptr) {
    return false;
  }
  bool refused = true;
  for (const addrinfo* ai = found; ai != nullptr && refused; ai = ai->ai_next) {
    refused = TryConnect(*ai, timeout) == ECONNREFUSED;
  }
  freeaddrinfo(found);
  return refused;
}

}  // namespace psflow
