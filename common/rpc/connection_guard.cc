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
  uint64_t inode = 0;
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

std::vector<uint64_t> ConnectionGuard::NewestBeyondCaps(
    std::vector<Seen> connections, const Options& options) {
  std::sort(connections.begin(), connections.end(),
            [](const Seen& a, const Seen& b) { return a.order < b.order; });
  // The newest beyond a cap are the ones dropped (connections that work
  // keep working).
  std::vector<uint64_t> excess;
  std::map<std::string, std::vector<uint64_t>> by_peer;  // oldest first
  for (const Seen& c : connections) by_peer[c.peer].push_back(c.inode);
  for (const auto& [peer, inodes] : by_peer) {
    if (options.max_per_peer <= 0 ||
        static_cast<int>(inodes.size()) <= options.max_per_peer) {
      continue;
    }
    excess.insert(excess.end(), inodes.begin() + options.max_per_peer,
                  inodes.end());
    LOG(WARNING) << options.what << " on port " << options.port << ": "
                 << inodes.size() << " connections from one peer (" << peer
                 << "); closing the newest "
                 << inodes.size() - options.max_per_peer << " (at most "
                 << options.max_per_peer << " per peer)";
  }
  if (options.max_total > 0 &&
      static_cast<int>(connections.size()) > options.max_total) {
    for (size_t i = options.max_total; i < connections.size(); ++i) {
      excess.push_back(connections[i].inode);
    }
    LOG(WARNING) << options.what << " on port " << options.port << ": "
                 << connections.size() << " connections; closing the newest "
                 << connections.size() - options.max_total << " (at most "
                 << options.max_total << ")";
  }
  std::sort(excess.begin(), excess.end());
  excess.erase(std::unique(excess.begin(), excess.end()), excess.end());
  return excess;
}

void ConnectionGuard::Enforce() {
  std::vector<Connection> connections = OwnConnections(options_.port);
  // How old a connection is: the look that first saw it, then (among those
  // a look sees first) its descriptor, which the process allocates in
  // accept order (lowest free first). Not the socket's inode: the kernel
  // hands inode numbers out in per-CPU batches, so a connection accepted
  // on one core can carry a lower inode than an older one accepted on
  // another (under load the guard then cut a peer's oldest connections).
  std::sort(
      connections.begin(), connections.end(),
      [](const Connection& a, const Connection& b) { return a.fd < b.fd; });
  std::vector<Seen> seen;
  std::map<uint64_t, int> fds;  // by inode
  {
    MutexLock lock(&mu_);
    std::map<uint64_t, uint64_t> first_seen;
    for (const Connection& c : connections) {
      auto known = first_seen_.find(c.inode);
      const uint64_t order =
          known != first_seen_.end() ? known->second : next_order_++;
      first_seen[c.inode] = order;
      seen.push_back(Seen{c.inode, c.fd, c.peer, order});
      fds[c.inode] = c.fd;
    }
    first_seen_.swap(first_seen);  // forgets the connections that ended
  }
  for (uint64_t inode : NewestBeyondCaps(std::move(seen), options_)) {
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
