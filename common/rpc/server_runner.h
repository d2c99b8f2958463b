// Starts and stops every gRPC server of psflow (the parameter server, the
// chief's Coordinator, the health-only server of workers and the
// evaluator) the same way:
//
//   Start: binds `listen_address` (port 0 picks a free port; port() says
//          which) with the job's transport security, SO_REUSEPORT off (a
//          second server on a busy port fails instead of silently sharing
//          it), grpc.health.v1 SERVING, the given services registered.
//   Drain: health NOT_SERVING, no new calls; calls in flight get `grace`
//          to finish, then are cancelled; returns once every handler
//          returned. Idempotent.
//
// Thread-safe. Drain() must not be called from a handler (it waits for
// the handlers); nothing it holds while draining is a lock a handler
// takes, so handlers that run during the drain never block on it.
#ifndef PSFLOW_COMMON_RPC_SERVER_RUNNER_H_
#define PSFLOW_COMMON_RPC_SERVER_RUNNER_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "common/rpc/connection_guard.h"
#include "common/rpc/transport_security.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/server.h"

namespace psflow {

struct ServerOptions {
  // host:port; port 0 picks a free one.
  std::string listen_address;
  // What the server is, for errors: "parameter server", "coordinator".
  std::string what = "server";
  TransportSecurity security;
  // Services to serve; not owned, and must outlive the runner unless
  // `owned` keeps them.
  std::vector<grpc::Service*> services;
  grpc::CallbackGenericService* generic_service = nullptr;
  // Kept alive by the runner until it has drained (a service it serves).
  std::shared_ptr<void> owned;
  // Message size limits in bytes (-1: gRPC's defaults).
  int max_receive_message_bytes = -1;
  int max_send_message_bytes = -1;
  // A connection without a call for this long is closed (its client
  // reconnects on its next call), so peers that connect and go quiet do not
  // hold sockets forever. Keepalive pings (every 30 s, 10 s to answer) find
  // vanished peers.
  absl::Duration max_connection_idle = absl::Minutes(5);
  // A connection whose TLS (or plaintext HTTP/2) handshake has not
  // finished within this is closed, so peers that connect and stall
  // mid-handshake hold no socket for longer.
  absl::Duration handshake_timeout = absl::Seconds(10);
  // Connections one peer address may hold at once, and all peers together
  // (connection_guard.h); beyond them the newest are closed. 0: no cap.
  int max_connections_per_peer = 512;
  int max_connections = 8192;
  // The most memory gRPC may hold for this server's connections and calls
  // (incoming messages still being received among them): past it, reads
  // slow down and new calls are refused, so clients that send half a
  // message and stall cannot pin more. 0: unbounded.
  int64_t memory_quota_bytes = 0;
  // Extra channel arguments (name, value); they override the above.
  std::vector<std::pair<std::string, int>> channel_args;
};

class ServerRunner {
 public:
  // Unavailable when the address cannot be bound (in use, not local).
  static absl::StatusOr<std::unique_ptr<ServerRunner>> Start(
      const ServerOptions& options);

  // Drains with a one-second grace if Drain() was not called.
  ~ServerRunner();

  int port() const { return port_; }

  // See the header comment. `during_drain` (tests only) runs on the
  // draining thread after new calls stop and before handlers are awaited,
  // where late handlers may still run.
  void Drain(absl::Duration grace,
             const std::function<void()>& during_drain = nullptr);

 private:
  ServerRunner() = default;

  std::shared_ptr<void> owned_;  // outlives server_
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  // Declared after server_: stops looking before the server goes.
  std::unique_ptr<ConnectionGuard> guard_;
  // Orders callers of Drain(); never taken by a handler.
  Mutex drain_mu_;
  bool drained_ ABSL_GUARDED_BY(drain_mu_) = false;
};

}  // namespace psflow

#endif  // PSFLOW_COMMON_RPC_SERVER_RUNNER_H_
