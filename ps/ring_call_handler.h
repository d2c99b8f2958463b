// Serves the parameter server's calls that a same-host client posts on the
// call ring in its shared-memory region (common/shared_call_ring.h): a
// PullBatch, a PushBatch with or without then_pull, a PullRows or a
// PushRows, whose values (and ids) lie in that region. The same rules as over
// gRPC (ps/grpc_ps_bulk_service.cc): every call is authorized as the identity
// that attached the region, and the PsService holds every rule of the modes.
#ifndef PSFLOW_PS_RING_CALL_HANDLER_H_
#define PSFLOW_PS_RING_CALL_HANDLER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/rpc/rpc_role.h"
#include "common/shared_call_ring_server.h"
#include "ps/ps_service.h"
#include "ps/shared_memory_sessions.h"

namespace psflow {

class RingCallHandler final : public SharedCallRingServer::Handler {
 public:
  // Whether the ring's client may call `method`, one of roles `allowed`;
  // asked for every call.
  using Allow =
      std::function<absl::Status(const RoleSet& allowed, absl::string_view)>;

  // `service` and `sessions` outlive the ring (the server stops its rings
  // before they go). `session` is the ring's own: its calls may name no
  // other.
  RingCallHandler(PsService* service, SharedMemorySessions* sessions,
                  uint64_t session, std::string caller, Allow allow)
      : service_(service),
        sessions_(sessions),
        session_(session),
        caller_(std::move(caller)),
        allow_(std::move(allow)) {}

  std::function<void()> Serve(uint32_t method, std::string request,
                              absl::Time deadline,
                              SharedCallRingServer::Reply reply) override;
  absl::Status Closed() override;

 private:
  std::function<void()> ServePush(const std::string& request,
                                  const SharedCallRingServer::Reply& reply);
  std::function<void()> ServePull(const std::string& request,
                                  const SharedCallRingServer::Reply& reply);
  std::function<void()> ServePullRows(const std::string& request,
                                      const SharedCallRingServer::Reply& reply);
  void ServePushRows(const std::string& request,
                     const SharedCallRingServer::Reply& reply);
  // Serves `request`'s pull into the client's memory; answers with
  // `pushed` (a push's answer, the pull's in its `pulled`) when set.
  std::function<void()> StartPull(const PullBatchRequest& request,
                                  std::optional<PushBatchResponse> pushed,
                                  const SharedCallRingServer::Reply& reply);

  PsService* const service_;
  SharedMemorySessions* const sessions_;
  const uint64_t session_;
  // The attach call's caller, whose session this is.
  const std::string caller_;
  const Allow allow_;
};

}  // namespace psflow

#endif  // PSFLOW_PS_RING_CALL_HANDLER_H_
