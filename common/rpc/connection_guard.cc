#include "common/rpc/connection_guard.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "common/logging.h"

namespace psflow {
namespace {

struct Connection {
  uint64_t inode = 0;  // grows with time: the highest are the newest
  int fd = -1;
  std::string peer;  // the remote address, without the port
};

// The port and address of a socket address, or port -1.
std::pair<int, std::string> PortAndAddress(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN] = "";
  if (address.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(address);
    inet_ntop(AF_INET, &in.sin_addr, text, sizeof(text));
    return {ntohs(in.sin_port), text};
  }
  if (address.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(address);
    inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof(text));
    return {ntohs(in6.sin6_port), text};
  }
  return {-1, ""};
}

// This process's established TCP connections on local `port`, from its own
// descriptors (/proc/self/fd): never the host's whole connection table,
// which /proc/net/tcp walks bucket by bucket on every read (milliseconds
// of kernel time on a host with a large table, twice a second in every
// process).
std::vector<Connection> OwnConnections(int port) {
  std::vector<Connection> out;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return out;
  while (dirent* entry = readdir(dir)) {
    int fd = 0;
    if (!absl::SimpleAtoi(entry->d_name, &fd)) continue;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage local{}, remote{};
    socklen_t local_size = sizeof(local), remote_size = sizeof(remote);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_size) !=
            0 ||
        PortAndAddress(local).first != port) {
      continue;
    }
    // The listening socket has no peer.
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remote_size) !=
        0) {
      continue;
    }
    tcp_info info{};
    socklen_t info_size = sizeof(info);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &info_size) != 0 ||
        info.tcpi_state != TCP_ESTABLISHED) {
      continue;
    }
    out.push_back(Connection{st.st_ino, fd, PortAndAddress(remote).second});
  }
  closedir(dir);
  return out;
}

}  // namespace

ConnectionGuard::ConnectionGuard(Options options)
    : options_(std::move(options)) {
  if (options_.max_per_peer > 0 || options_.max_total > 0) {
    thread_ = std::thread([this] { Run(); });
  }
}

ConnectionGuard::~ConnectionGuard() {
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

void ConnectionGuard::Run() {
  while (!stop_.WaitForNotificationWithTimeout(options_.period)) Enforce();
}

void ConnectionGuard::Enforce() {
  const std::vector<Connection> connections = OwnConnections(options_.port);
  if (connections.empty()) return;
  std::map<uint64_t, int> fds;  // by inode
  std::map<std::string, std::vector<uint64_t>> by_peer;
  std::vector<uint64_t> all;
  for (const Connection& c : connections) {
    fds[c.inode] = c.fd;
    by_peer[c.peer].push_back(c.inode);
    all.push_back(c.inode);
  }
  // The newest beyond a cap are the ones dropped (connections that work
  // keep working).
  std::vector<uint64_t> excess;
  for (auto& [peer, inodes] : by_peer) {
    if (options_.max_per_peer <= 0 ||
        static_cast<int>(inodes.size()) <= options_.max_per_peer) {
      continue;
    }
    std::sort(inodes.begin(), inodes.end());
    excess.insert(excess.end(), inodes.begin() + options_.max_per_peer,
                  inodes.end());
    LOG(WARNING) << options_.what << " on port " << options_.port << ": "
                 << inodes.size() << " connections from one peer (" << peer
                 << "); closing the newest "
                 << inodes.size() - options_.max_per_peer << " (at most "
                 << options_.max_per_peer << " per peer)";
  }
  if (options_.max_total > 0 &&
      static_cast<int>(all.size()) > options_.max_total) {
    std::sort(all.begin(), all.end());
    excess.insert(excess.end(), all.begin() + options_.max_total, all.end());
    LOG(WARNING) << options_.what << " on port " << options_.port << ": "
                 << all.size() << " connections; closing the newest "
                 << all.size() - options_.max_total << " (at most "
                 << options_.max_total << ")";
  }
  std::sort(excess.begin(), excess.end());
  excess.erase(std::unique(excess.begin(), excess.end()), excess.end());
  for (uint64_t inode : excess) {
    const int fd = fds.at(inode);
    // The descriptor may have been closed and reused since it was listed:
    // act only on the same socket.
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_ino != inode) {
      continue;
    }
    shutdown(fd, SHUT_RDWR);
    ++dropped_;
  }
}

}  // namespace psflow
