// Serves a ParameterServerCore over gRPC: the typed control service
// (Configure, CreateVariables, Stats, Shutdown, shared-memory attach), the
// bulk tensor methods (Pull, Push, Assign and batches; see
// common/rpc/bulk_frame.h) and grpc.health.v1.Health.
//
// Lifecycle (a small state machine):
//   Start()    -> serving; port() is the bound port (useful with port 0)
//   Shutdown RPC or RequestShutdown()
//              -> draining: health reports NOT_SERVING, in-flight RPCs get
//                 `grace` to finish, then are cancelled
//   Wait()     returns once drained; the destructor also drains.
//
// Handlers never block a gRPC thread: a pull waiting for a sync step
// registers a callback on the chunk and is answered by the push that
// completes the step, or cancelled at the client's deadline.
//
// Thread-safe.
#ifndef PSFLOW_PS_GRPC_PS_SERVER_H_
#define PSFLOW_PS_GRPC_PS_SERVER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/buffer_pool.h"
#include "common/clock.h"
#include "common/confined_path.h"
#include "common/mutex.h"
#include "common/rpc/call_authorizer.h"
#include "common/rpc/rpc_role.h"
#include "common/rpc/server_runner.h"
#include "common/rpc/transport_security.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/impl/service_type.h"
#include "ps/chief_fence.h"
#include "ps/ps_core.h"
#include "ps/ps_service.h"
#include "ps/shared_memory_sessions.h"

namespace psflow {

class GrpcParameterServer {
 public:
  struct Options {
    // host:port to listen on; port 0 picks a free port.
    std::string listen_address = "0.0.0.0:0";
    ParameterServerCore::Options core;
    // How long in-flight RPCs may run after shutdown is requested.
    absl::Duration grace = absl::Seconds(5);
    // Same-host clients' shared-memory regions (docs/wire-protocol.md).
    SharedMemorySessions::Options shared_memory;
    TransportSecurity security;
    // Where SaveShard and RestoreShard may touch files (--checkpoint_root);
    // none: any absolute path a peer names.
    std::optional<PathConfinement> checkpoint_root;
    // The server shuts itself down when the chief, once heard from, has
    // not called for this long (its Stats come every second): a job whose
    // chief died and did not come back does not leave servers behind.
    absl::Duration chief_silence_limit = absl::InfiniteDuration();
    // The server shuts itself down when no chief has called within this
    // long of its start: servers start first, but a job whose chief never
    // came (it died at start-up, or TF_CONFIG sends it elsewhere) does not
    // leave servers behind either.
    absl::Duration first_chief_limit = absl::InfiniteDuration();
    // One job, one chief (chief_fence.h): another chief incarnation may
    // take the server over once the one it follows has been silent this
    // long (its Stats come every second).
    absl::Duration chief_takeover_after = absl::Seconds(10);
    // The most memory gRPC may hold for this server's connections and calls
    // (ps_server --rpc_memory_quota_bytes): incoming messages still being
    // received count, so clients that stall mid-message cannot pin more.
    int64_t rpc_memory_quota_bytes = int64_t{1} << 30;
    // What the chief's silence and takeovers are measured on.
    Clock* clock = &RealClock();
    // Tests only: runs on the draining thread between Shutdown() and the
    // end of the drain, where handlers may still run.
    std::function<void()> during_drain_for_testing;
  };

  // Binds and starts serving. Unavailable when the address cannot be bound
  // (port in use, bad host).
  static absl::StatusOr<std::unique_ptr<GrpcParameterServer>> Start(
      const Options& options);

  ~GrpcParameterServer();

  int port() const { return server_->port(); }
  ParameterServerCore& core() { return *core_; }
  // The checkpoint root, or null when paths are not confined.
  const PathConfinement* checkpoint_root() const {
    return checkpoint_root_ ? &*checkpoint_root_ : nullptr;
  }
  // Same-host clients' shared-memory sessions.
  SharedMemorySessions& shared_memory() { return *shared_memory_; }
  // The core's counters plus the transport's (shared memory).
  StatsResponse Stats() const;
  // Who may call what: the caller's job token and certificate.
  const CallAuthorizer& authorizer() const { return *authorizer_; }
  // OK when the caller of `context` has one of `roles`; otherwise
  // UNAUTHENTICATED or PERMISSION_DENIED naming `method`. A chief's call
  // (a method for the chief only, or any call carrying a chief
  // incarnation) must also come from the chief the server follows, else
  // ABORTED (chief_fence.h); it then counts as the chief's sign of life.
  absl::Status Allow(const grpc::ServerContextBase& context,
                     const RoleSet& roles, absl::string_view method);
  // Allow(), returning the caller's name (CallAuthorizer::Caller): whom a
  // shared-memory session belongs to.
  absl::StatusOr<std::string> AllowCaller(
      const grpc::ServerContextBase& context, const RoleSet& roles,
      absl::string_view method);
  // Allow()'s second half, for a caller already authorized as `role`
  // (nullopt: an open server). Only a chief's calls are fenced: the chief
  // incarnation a caller of another role sends is ignored, so a worker,
  // evaluator or admin can neither take the fence nor lock the chief out.
  absl::Status FenceChiefCalls(const grpc::ServerContextBase& context,
                               std::optional<RpcRole> role,
                               const RoleSet& roles, absl::string_view method);

  // Serves the call ring a client wrote at `offset` in its region
  // `session` (AttachSharedMemoryRequest.ring_offset): every call on it is
  // authorized as the attach call's caller was (its role, its chief
  // incarnation), as if it came over gRPC.
  absl::Status ServeRing(const grpc::ServerContextBase& attach,
                         uint64_t session, int64_t offset);

  // Whether the server stopped because the chief fell silent.
  bool chief_lost() const { return chief_lost_.load(); }
  // Brackets a chief's call that runs long (a save or restore): while one
  // runs, the chief counts as alive however long it takes.
  void ChiefCallStarted() { chief_fence_->CallStarted(); }
  void ChiefCallEnded() { chief_fence_->CallEnded(clock_->Now()); }

  // Starts draining; `reason` is logged. Safe to call more than once and
  // from any thread (not from a signal handler).
  void RequestShutdown(const std::string& reason);

  // The process received SIGTERM/SIGINT and serves on only for a grace
  // period: Stats() says so (StatsResponse.terminating), so the chief
  // saves a checkpoint while it still can.
  void MarkTerminating() { terminating_.store(true); }

  // Blocks until shutdown was requested and the server has drained.
  // Returns the reason given to RequestShutdown or the Shutdown RPC.
  std::string Wait();

  // Runs `work` on a thread of its own (checkpoint saves and restores,
  // which wait on disks and workers); Wait() joins these threads before
  // draining, so `work` must finish soon once shutdown_requested().
  void RunInBackground(std::function<void()> work);

  bool shutdown_requested() const {
    return shutdown_requested_.HasBeenNotified();
  }

  class ControlService;
  class BulkService;

 private:
  GrpcParameterServer() = default;

  // The services, each in a file of its own (grpc_ps_control_service.cc,
  // grpc_ps_bulk_service.cc).
  static std::unique_ptr<grpc::Service> NewControlService(
      GrpcParameterServer* server);
  static std::unique_ptr<grpc::CallbackGenericService> NewBulkService(
      PsService* service, SharedMemorySessions* shared_memory,
      GrpcParameterServer* server);

  std::unique_ptr<ParameterServerCore> core_;
  std::shared_ptr<BufferPool> pool_;
  std::unique_ptr<SharedMemorySessions> shared_memory_;
  std::optional<PathConfinement> checkpoint_root_;
  std::unique_ptr<PsService> service_;
  std::unique_ptr<CallAuthorizer> authorizer_;
  std::unique_ptr<grpc::Service> control_;              // a ControlService
  std::unique_ptr<grpc::CallbackGenericService> bulk_;  // a BulkService
  std::unique_ptr<ServerRunner> server_;
  absl::Duration grace_;
  std::function<void()> during_drain_for_testing_;

  // Runs in the background until shutdown: lifts a checkpoint hold whose
  // lease lapsed, and shuts the server down once the chief has been silent
  // longer than `limit`, or no chief has called within `first_limit` of
  // the start.
  void WatchTheChief(absl::Duration limit, absl::Duration first_limit);
  // Hold RPCs: applies `request` and starts (FREEZE, HOLD_AT) or ends
  // (RELEASE) its lease.
  absl::StatusOr<HoldResponse> HoldWithLease(const HoldRequest& request);
  // Lifts the hold when the chief has been silent past its lease.
  void ReleaseLapsedHold(absl::Duration silent);

  Notification shutdown_requested_;
  std::atomic<bool> terminating_{false};
  // Which chief the server follows, and when it last called.
  std::unique_ptr<ChiefFence> chief_fence_;
  Clock* clock_ = &RealClock();
  std::atomic<bool> chief_lost_{false};
  // The lease of the checkpoint hold in place; none without a hold.
  Mutex hold_mu_;
  std::optional<absl::Duration> hold_lease_ ABSL_GUARDED_BY(hold_mu_);
  Mutex mu_;
  std::string reason_ ABSL_GUARDED_BY(mu_);
  // Threads of RunInBackground; finished ones are joined by the next call,
  // so a long job's many checkpoints do not pile up threads.
  struct BackgroundThread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  Mutex background_mu_;
  std::vector<BackgroundThread> background_ ABSL_GUARDED_BY(background_mu_);
};

}  // namespace psflow

#endif  // PSFLOW_PS_GRPC_PS_SERVER_H_
