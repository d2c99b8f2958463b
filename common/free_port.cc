#include "common/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"

namespace psflow {
namespace {

constexpr int kLowestServerPort = 10000;
constexpr int kHighestPort = 65535;
// Fewer candidates than this outside the ephemeral range: let the kernel
// choose instead (random picks would collide with each other too often).
constexpr int kMinCandidates = 1024;

// A socket bound to `port` on 127.0.0.1 (0: a kernel-chosen one, written
// back to `port`); -1 when that port is taken, or on error (`error` set
// only for errors other than a taken port).
int BindPort(int& port, absl::Status& error) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error =
        absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
    return -1;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int saved = errno;
    close(fd);
    if (port == 0 || (saved != EADDRINUSE && saved != EACCES)) {
      error = absl::UnavailableError(
          absl::StrCat("cannot find a free port: ", std::strerror(saved)));
    }
    return -1;
  }
  port = ntohs(addr.sin_port);
  return fd;
}

}  // namespace

std::pair<int, int> EphemeralPortRange() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  int high = 0;
  if (in >> low >> high && 0 < low && low <= high && high <= kHighestPort) {
    return {low, high};
  }
  return {32768, 60999};
}

std::vector<std::pair<int, int>> ServerPortRanges(int ephemeral_low,
                                                  int ephemeral_high) {
  std::vector<std::pair<int, int>> ranges;
  int size = 0;
  auto add = [&](int low, int high) {
    low = std::max(low, kLowestServerPort);
    high = std::min(high, kHighestPort);
    if (low > high) return;
    ranges.emplace_back(low, high);
    size += high - low + 1;
  };
  add(kLowestServerPort, ephemeral_low - 1);
  add(ephemeral_high + 1, kHighestPort);
  if (size < kMinCandidates) ranges.clear();
  return ranges;
}

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
  const auto [ephemeral_low, ephemeral_high] = EphemeralPortRange();
  const std::vector<std::pair<int, int>> ranges =
      ServerPortRanges(ephemeral_low, ephemeral_high);
  int candidates = 0;
  for (const auto& [low, high] : ranges) candidates += high - low + 1;
  // Every socket stays bound until all are chosen, so no port is handed
  // out twice.
  std::vector<int> fds;
  std::vector<int> ports;
  std::set<int> tried;
  absl::BitGen random;
  absl::Status error;
  // Random picks, so that launchers starting at once rarely try the same
  // ports; a bounded number of tries, then the kernel's choice.
  for (int attempt = 0; static_cast<int>(ports.size()) < count && error.ok() &&
                        attempt < 64 * count + 64;
       ++attempt) {
    if (candidates == 0) break;
    int index = absl::Uniform(random, 0, candidates);
    int port = 0;
    for (const auto& [low, high] : ranges) {
      if (index <= high - low) {
        port = low + index;
        break;
      }
      index -= high - low + 1;
    }
    if (!tried.insert(port).second) continue;
    const int fd = BindPort(port, error);
    if (fd < 0) continue;
    fds.push_back(fd);
    ports.push_back(port);
  }
  while (static_cast<int>(ports.size()) < count && error.ok()) {
    int port = 0;
    const int fd = BindPort(port, error);
    if (fd < 0) break;
    fds.push_back(fd);
    ports.push_back(port);
  }
  for (int fd : fds) close(fd);
  if (!error.ok()) return error;
  return ports;
}

}  // namespace psflow
