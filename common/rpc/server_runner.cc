#include "common/rpc/server_runner.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/server_builder.h"

namespace psflow {

absl::StatusOr<std::unique_ptr<ServerRunner>> ServerRunner::Start(
    const ServerOptions& options) {
  std::unique_ptr<ServerRunner> runner(new ServerRunner);
  runner->owned_ = options.owned;
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen_address,
                           ServerCredentialsFor(options.security),
                           &runner->port_);
  // gRPC enables SO_REUSEPORT by default: a second server on a busy port
  // would silently share it and split the clients. Fail instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // A connection must finish its (TLS) handshake within this, or it is
  // closed: half-finished handshakes cannot pile up (gRPC's default: 120 s).
  builder.AddChannelArgument(
      GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
      static_cast<int>(std::min<int64_t>(
          absl::ToInt64Milliseconds(options.handshake_timeout), INT32_MAX)));
  // Idle and vanished peers do not pin connections (ServerOptions).
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 30 * 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10 * 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(
      GRPC_ARG_MAX_CONNECTION_IDLE_MS,
      static_cast<int>(std::min<int64_t>(
          absl::ToInt64Milliseconds(options.max_connection_idle), INT32_MAX)));
  if (options.max_receive_message_bytes >= 0) {
    builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  }
  if (options.max_send_message_bytes >= 0) {
    builder.SetMaxSendMessageSize(options.max_send_message_bytes);
  }
  if (options.memory_quota_bytes > 0) {
    grpc::ResourceQuota quota(absl::StrCat(options.what, " quota"));
    quota.Resize(static_cast<size_t>(options.memory_quota_bytes));
    builder.SetResourceQuota(quota);
  }
  for (const auto& [name, value] : options.channel_args) {
    builder.AddChannelArgument(name, value);
  }
  for (grpc::Service* service : options.services) {
    builder.RegisterService(service);
  }
  if (options.generic_service != nullptr) {
    builder.RegisterCallbackGenericService(options.generic_service);
  }
  runner->server_ = builder.BuildAndStart();
  if (runner->server_ == nullptr || runner->port_ == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", options.listen_address, " for the ", options.what,
        ": the port is in use or the address is not local; free the port or "
        "fix the task's address in TF_CONFIG"));
  }
  ConnectionGuard::Options guard;
  guard.port = runner->port_;
  guard.what = options.what;
  guard.max_per_peer = options.max_connections_per_peer;
  guard.max_total = options.max_connections;
  runner->guard_ = std::make_unique<ConnectionGuard>(guard);
  return runner;
}

void ServerRunner::Drain(absl::Duration grace,
                         const std::function<void()>& during_drain) {
  MutexLock lock(&drain_mu_);
  if (drained_) return;
  if (auto* health = server_->GetHealthCheckService()) {
    health->SetServingStatus(false);
  }
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  if (during_drain) during_drain();
  server_->Wait();
  drained_ = true;
}

ServerRunner::~ServerRunner() {
  if (server_ != nullptr) Drain(absl::Seconds(1));
}

}  // namespace psflow
