// Caps how many connections one peer may hold to a server at once, and how
// many all peers may, so that a peer opening connections (completing their
// TLS handshakes or not) cannot pin a server's sockets and memory: gRPC
// 1.51 has no such limit. A thread looks every `period` at this process's
// established connections on the server's port (its own socket
// descriptors, /proc/self/fd) and shuts down the newest beyond each cap;
// gRPC then
// sees the connection end and frees it. The handshake deadline
// (ServerOptions::handshake_timeout) drops stalled handshakes below the
// caps too.
//
// Thread-safe; the thread stops when the guard is destroyed.
#ifndef PSFLOW_COMMON_RPC_CONNECTION_GUARD_H_
#define PSFLOW_COMMON_RPC_CONNECTION_GUARD_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "common/mutex.h"

namespace psflow {

class ConnectionGuard {
 public:
  struct Options {
    int port = 0;
    // What the server is, for the log ("parameter server").
    std::string what = "server";
    // Connections one peer address may hold at once (0: no cap).
    int max_per_peer = 512;
    // Connections all peers together may hold (0: no cap).
    int max_total = 8192;
    absl::Duration period = absl::Milliseconds(500);
  };

  explicit ConnectionGuard(Options options);
  ~ConnectionGuard();

  ConnectionGuard(const ConnectionGuard&) = delete;
  ConnectionGuard& operator=(const ConnectionGuard&) = delete;

  // Connections shut down so far for exceeding a cap.
  int64_t dropped() const { return dropped_.load(); }

  // One look, now (the thread calls it every period; tests call it too).
  void Enforce();

  // An established connection as one look saw it. `order` says how old it
  // is: lower was seen first.
  struct Seen {
    uint64_t inode = 0;
    int fd = -1;
    std::string peer;  // the remote address, without the port
    uint64_t order = 0;
  };
  // The inodes of the connections to shut down: the newest (highest
  // `order`) beyond each of `options`' caps. For Enforce, and tests.
  static std::vector<uint64_t> NewestBeyondCaps(std::vector<Seen> connections,
                                                const Options& options);

 private:
  void Run();

  const Options options_;
  // When each connection was first seen (see Enforce), by socket inode;
  // only the connections of the last look.
  Mutex mu_;
  std::map<uint64_t, uint64_t> first_seen_ ABSL_GUARDED_BY(mu_);
  uint64_t next_order_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int64_t> dropped_{0};
  Notification stop_;
  std::thread thread_;
};

}  // namespace psflow

#endif  // PSFLOW_COMMON_RPC_CONNECTION_GUARD_H_
