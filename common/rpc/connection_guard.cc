#include "common/rpc/connection_guard.h"

#include <dirent.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"

namespace psflow {
namespace {

constexpr char kEstablished[] = "01";

struct Connection {
  uint64_t inode = 0;
  std::string peer;  // the remote address, hex as /proc writes it
};

// This host's established connections to local `port`, from one of
// /proc/net/tcp and /proc/net/tcp6.
void ReadConnections(const char* path, int port, std::vector<Connection>& out) {
  std::ifstream table(path);
  std::string line;
  std::getline(table, line);  // the header
  while (std::getline(table, line)) {
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() < 10 || fields[3] != kEstablished) continue;
    const size_t colon = fields[1].rfind(':');
    uint32_t local_port = 0;
    if (colon == absl::string_view::npos ||
        !absl::SimpleHexAtoi(fields[1].substr(colon + 1), &local_port) ||
        static_cast<int>(local_port) != port) {
      continue;
    }
    Connection c;
    if (!absl::SimpleAtoi(fields[9], &c.inode) || c.inode == 0) continue;
    const size_t remote_colon = fields[2].rfind(':');
    c.peer = std::string(fields[2].substr(0, remote_colon));
    out.push_back(std::move(c));
  }
}

// This process's socket descriptors by inode.
std::map<uint64_t, int> SocketsByInode() {
  std::map<uint64_t, int> sockets;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return sockets;
  while (dirent* entry = readdir(dir)) {
    int fd = 0;
    if (!absl::SimpleAtoi(entry->d_name, &fd)) continue;
    char target[64];
    const std::string link = absl::StrCat("/proc/self/fd/", entry->d_name);
    const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    uint64_t inode = 0;
    absl::string_view text(target, n);
    if (absl::ConsumePrefix(&text, "socket:[") &&
        absl::ConsumeSuffix(&text, "]") && absl::SimpleAtoi(text, &inode)) {
      sockets[inode] = fd;
    }
  }
  closedir(dir);
  return sockets;
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
  std::vector<Connection> connections;
  ReadConnections("/proc/net/tcp", options_.port, connections);
  ReadConnections("/proc/net/tcp6", options_.port, connections);
  if (connections.empty()) return;
  const std::map<uint64_t, int> ours = SocketsByInode();
  // Only this process's ends (a client on this host to the same port has
  // its own ends in the table too, with other inodes).
  std::map<std::string, std::vector<uint64_t>> by_peer;
  std::vector<uint64_t> all;
  for (const Connection& c : connections) {
    if (ours.count(c.inode) == 0) continue;
    by_peer[c.peer].push_back(c.inode);
    all.push_back(c.inode);
  }
  // Socket inodes grow with time: the highest are the newest, which are
  // the ones dropped (connections that work keep working).
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
                 << " in /proc/net/tcp's notation); closing the newest "
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
    const int fd = ours.at(inode);
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
