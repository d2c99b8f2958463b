#include "ps/grpc_ps_server.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/metrics/process_metrics.h"
#include "common/rpc/bulk_frame.h"
#include "common/rpc/call_authorizer.h"
#include "common/rpc/grpc_status.h"
#include "common/rpc/grpc_tuning.h"
#include "common/status_macros.h"
#include "grpcpp/generic/async_generic_service.h"
#include "proto/protocol.h"
#include "proto/ps.grpc.pb.h"
#include "ps/ps_service.h"
#include "ps/ring_call_handler.h"
#include "ps/shard_checkpoint.h"
#include "ps/shared_memory_sessions.h"

namespace psflow {

// ---- Who may call what (ps_call_roles.h says which roles) -----------------

absl::Status GrpcParameterServer::Allow(const grpc::ServerContextBase& context,
                                        const RoleSet& roles,
                                        absl::string_view method) {
  return AllowCaller(context, roles, method).status();
}

absl::StatusOr<std::string> GrpcParameterServer::AllowCaller(
    const grpc::ServerContextBase& context, const RoleSet& roles,
    absl::string_view method) {
  ASSIGN_OR_RETURN(CallAuthorizer::Caller caller,
                   authorizer_->AuthorizeCaller(context, roles, method));
  RETURN_IF_ERROR(FenceChiefCalls(context, caller.role, roles, method));
  return std::move(caller.name);
}

namespace {

// Whether a caller of `role` speaks for the chief (and so is fenced): the
// chief itself, or anyone on an open server, which tells roles apart only
// by what the calls say.
bool MaySpeakForTheChief(std::optional<RpcRole> role) {
  return !role.has_value() || *role == RpcRole::kChief;
}

}  // namespace

absl::Status GrpcParameterServer::FenceChiefCalls(
    const grpc::ServerContextBase& context, std::optional<RpcRole> role,
    const RoleSet& roles, absl::string_view method) {
  if (!MaySpeakForTheChief(role)) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  const auto incarnation = metadata.find(kChiefIncarnationMetadataKey);
  const bool chiefs_call =
      incarnation != metadata.end() || !roles.Contains(RpcRole::kWorker);
  if (!chiefs_call) return absl::OkStatus();
  return chief_fence_->Admit(
      incarnation == metadata.end()
          ? absl::string_view()
          : absl::string_view(incarnation->second.data(),
                              incarnation->second.size()),
      method, clock_->Now());
}

absl::Status GrpcParameterServer::ServeRing(
    const grpc::ServerContextBase& attach, uint64_t session, int64_t offset) {
  ASSIGN_OR_RETURN(CallAuthorizer::Caller caller,
                   authorizer_->IdentifyCaller(attach));
  const std::optional<RpcRole> role = caller.role;
  const auto& metadata = attach.client_metadata();
  const auto found = metadata.find(kChiefIncarnationMetadataKey);
  std::optional<std::string> incarnation;
  if (found != metadata.end()) {
    incarnation = std::string(found->second.data(), found->second.size());
  }
  // What Allow() checks per gRPC call, against the attach call's identity.
  auto allow = [this, role, incarnation](
                   const RoleSet& roles,
                   absl::string_view method) -> absl::Status {
    if (role.has_value() && !roles.Contains(*role)) {
      return absl::PermissionDeniedError(
          absl::StrCat(method, " is for ", roles.Describe(),
                       " only; the caller's role is ", RpcRoleName(*role)));
    }
    if (!MaySpeakForTheChief(role)) return absl::OkStatus();
    if (!incarnation.has_value() && roles.Contains(RpcRole::kWorker)) {
      return absl::OkStatus();
    }
    return chief_fence_->Admit(incarnation.value_or(""), method, clock_->Now());
  };
  return shared_memory_->ServeRing(
      session, offset,
      std::make_shared<RingCallHandler>(service_.get(), shared_memory_.get(),
                                        session, std::move(caller.name),
                                        std::move(allow)));
}

// ---- Lifecycle -------------------------------------------------------------

absl::StatusOr<std::unique_ptr<GrpcParameterServer>> GrpcParameterServer::Start(
    const Options& options) {
  std::unique_ptr<GrpcParameterServer> server(new GrpcParameterServer);
  server->grace_ = options.grace;
  server->checkpoint_root_ = options.checkpoint_root;
  server->during_drain_for_testing_ = options.during_drain_for_testing;
  server->core_ = std::make_unique<ParameterServerCore>(options.core);
  server->clock_ = options.clock;
  server->chief_fence_ =
      std::make_unique<ChiefFence>(options.chief_takeover_after);
  // Idle chunk buffers kept for reuse: enough for many in-flight chunks.
  server->pool_ = BufferPool::Create(size_t{256} << 20);
  server->shared_memory_ =
      std::make_unique<SharedMemorySessions>(options.shared_memory);
  server->control_ = NewControlService(server.get());
  server->service_ =
      std::make_unique<PsService>(server->core_.get(), server->pool_.get());
  server->authorizer_ = std::make_unique<CallAuthorizer>(options.security);
  server->bulk_ = NewBulkService(server->service_.get(),
                                 server->shared_memory_.get(), server.get());

  ServerOptions server_options;
  server_options.listen_address = options.listen_address;
  server_options.what = "parameter server";
  server_options.security = options.security;
  server_options.services = {server->control_.get()};
  server_options.generic_service = server->bulk_.get();
  server_options.max_receive_message_bytes = kMaxBulkMessageBytes;
  server_options.max_send_message_bytes = kMaxBulkMessageBytes;
  server_options.channel_args = BulkTransportChannelArgs();
  server_options.memory_quota_bytes = options.rpc_memory_quota_bytes;
  ASSIGN_OR_RETURN(server->server_, ServerRunner::Start(server_options));
  server->WatchTheChief(options.chief_silence_limit, options.first_chief_limit);
  return server;
}

absl::StatusOr<HoldResponse> GrpcParameterServer::HoldWithLease(
    const HoldRequest& request) {
  constexpr int64_t kMaxLeaseMs = 3600 * 1000;
  const bool holds = request.action() == HoldRequest::FREEZE ||
                     request.action() == HoldRequest::HOLD_AT;
  if (holds && (request.lease_ms() < 1 || request.lease_ms() > kMaxLeaseMs)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HoldRequest.lease_ms is ", request.lease_ms(),
        "; a hold needs a lease of 1 ms to 1 hour, after which the server "
        "lifts it unless the chief calls"));
  }
  MutexLock lock(&hold_mu_);
  absl::StatusOr<HoldResponse> result = core_->Hold(request);
  if (result.ok()) {
    if (holds) {
      hold_lease_ = absl::Milliseconds(request.lease_ms());
    } else {
      hold_lease_.reset();
    }
  }
  return result;
}

void GrpcParameterServer::ReleaseLapsedHold(absl::Duration silent) {
  MutexLock lock(&hold_mu_);
  if (!hold_lease_.has_value() || silent <= *hold_lease_) return;
  HoldRequest release;
  release.set_protocol_version(kProtocolVersion);
  release.set_action(HoldRequest::RELEASE);
  absl::StatusOr<HoldResponse> released = core_->Hold(release);
  LOG(WARNING) << "lifted the checkpoint hold: the chief that placed it has "
                  "not called for "
               << absl::FormatDuration(absl::Trunc(silent, absl::Seconds(1)))
               << " (its lease was " << absl::FormatDuration(*hold_lease_)
               << "); updates go on"
               << (released.ok()
                       ? ""
                       : absl::StrCat(" (", released.status().message(), ")"));
  hold_lease_.reset();
}

void GrpcParameterServer::WatchTheChief(absl::Duration limit,
                                        absl::Duration first_limit) {
  const absl::Time started = clock_->Now();
  RunInBackground([this, limit, first_limit, started] {
    // Often enough for hold leases (seconds) and the silence limits alike.
    const absl::Duration poll =
        std::clamp(std::min(limit, first_limit) / 10, absl::Milliseconds(10),
                   absl::Milliseconds(100));
    while (!shutdown_requested_.WaitForNotificationWithTimeout(poll)) {
      // None before the first chief (servers start first), nor while a
      // long save or restore of its runs.
      const std::optional<absl::Duration> silent =
          chief_fence_->OwnerSilence(clock_->Now());
      if (!silent.has_value()) {
        const absl::Duration waited = clock_->Now() - started;
        if (!chief_fence_->owner().has_value() && waited > first_limit) {
          chief_lost_.store(true);
          RequestShutdown(absl::StrCat(
              "no chief has called in ",
              absl::FormatDuration(absl::Trunc(waited, absl::Seconds(1))),
              " since this server started (--startup_timeout_s=",
              absl::ToInt64Seconds(first_limit),
              "): check that the chief runs and that its TF_CONFIG names "
              "this server"));
          return;
        }
        continue;
      }
      ReleaseLapsedHold(*silent);
      if (*silent > limit) {
        chief_lost_.store(true);
        RequestShutdown(absl::StrCat(
            "the chief has not called for ",
            absl::FormatDuration(absl::Trunc(*silent, absl::Seconds(1))),
            " (--chief_timeout_s=", absl::ToInt64Seconds(limit),
            "): the job is gone or its chief did not come back"));
        return;
      }
    }
  });
}

StatsResponse GrpcParameterServer::Stats() const {
  StatsResponse stats = core_->Stats();
  stats.set_shared_memory_sessions(shared_memory_->size());
  stats.set_shared_memory_bytes(shared_memory_->bytes());
  stats.set_shared_memory_rings(shared_memory_->rings());
  stats.set_shared_memory_ring_calls(shared_memory_->ring_calls());
  stats.set_resident_bytes(ResidentMemoryBytes().value_or(0));
  stats.set_terminating(terminating_.load());
  return stats;
}

void GrpcParameterServer::RequestShutdown(const std::string& reason) {
  // Handlers call this (the Shutdown RPC) while Wait() may be draining:
  // it takes only mu_, which Wait() never holds across the drain.
  MutexLock lock(&mu_);
  if (shutdown_requested_.HasBeenNotified()) return;
  reason_ = reason;
  shutdown_requested_.Notify();
}

void GrpcParameterServer::RunInBackground(std::function<void()> work) {
  MutexLock lock(&background_mu_);
  for (auto it = background_.begin(); it != background_.end();) {
    if (it->done->load()) {
      it->thread.join();
      it = background_.erase(it);
    } else {
      ++it;
    }
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  background_.push_back(
      BackgroundThread{std::thread([work = std::move(work), done] {
                         work();
                         done->store(true);
                       }),
                       done});
}

std::string GrpcParameterServer::Wait() {
  shutdown_requested_.WaitForNotification();
  // Background work sees shutdown_requested() and ends soon; joining it
  // before and after draining (a save may arrive while the server drains)
  // means no handler outlives the server.
  auto join_background = [this] {
    std::vector<BackgroundThread> threads;
    {
      MutexLock lock(&background_mu_);
      threads.swap(background_);
    }
    for (BackgroundThread& t : threads) t.thread.join();
  };
  join_background();
  // The runner holds nothing a handler takes while it drains, so handlers
  // that run during the drain (a late Shutdown RPC) never block on it.
  // Draining must not run under a handler; Wait() is the owner's thread.
  server_->Drain(grace_, during_drain_for_testing_);
  join_background();
  // The call rings stop before the service they call goes: each answers
  // what it holds and tells its client it closed.
  shared_memory_->DetachAll();
  MutexLock lock(&mu_);
  return reason_;
}

GrpcParameterServer::~GrpcParameterServer() {
  if (server_ == nullptr) return;
  RequestShutdown("server destroyed");
  Wait();
}

}  // namespace psflow
