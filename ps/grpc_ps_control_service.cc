// The parameter server's control RPCs (proto/ps.proto's ParameterServer
// service): Configure, CreateVariables, Stats, checkpoints, shutdown.
// Each call's role is checked first (ps_call_roles.h); the requests a
// parser multiplies most arrive raw and are bounded before parsing.
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
#include "ps/grpc_ps_server.h"
#include "ps/ps_call_roles.h"
#include "ps/ps_service.h"
#include "ps/shard_checkpoint.h"
#include "ps/shared_memory_sessions.h"

namespace psflow {

// ---- Control RPCs ----------------------------------------------------------

// Every request arrives raw: the caller's role is checked and the size
// bounded before anything is parsed. A parser multiplies what it reads (a
// 2-byte VariableSpec, or a 2-byte unknown field, becomes 16 to 100 bytes
// of objects), so a caller that may not make a call, or a request far
// larger than its kind needs, costs the server no more than its bytes.
using ControlServiceBase = ParameterServer::WithRawCallbackMethod_Configure<
    ParameterServer::WithRawCallbackMethod_CreateVariables<
        ParameterServer::WithRawCallbackMethod_Stats<
            ParameterServer::WithRawCallbackMethod_AttachSharedMemory<
                ParameterServer::WithRawCallbackMethod_DetachSharedMemory<
                    ParameterServer::WithRawCallbackMethod_ExcludeWorkers<
                        ParameterServer::WithRawCallbackMethod_Hold<
                            ParameterServer::WithRawCallbackMethod_SaveShard<
                                ParameterServer::
                                    WithRawCallbackMethod_RestoreShard<
                                        ParameterServer::
                                            WithRawCallbackMethod_Shutdown<
                                                ParameterServer::
                                                    CallbackService>>>>>>>>>>;

// The requests of fixed, small shape (Configure, Stats, shared memory,
// Hold, SaveShard, Shutdown) need a few KiB; CreateVariables, RestoreShard
// and ExcludeWorkers grow with the job, up to kMaxControlRequestBytes.
constexpr int64_t kMaxSmallControlRequestBytes = int64_t{1} << 20;

// `raw` as a `Message`, when it is at most `max_bytes`.
template <typename Message>
absl::Status ParseControlRequest(const grpc::ByteBuffer& raw,
                                 absl::string_view method, Message* out,
                                 int64_t max_bytes = kMaxControlRequestBytes) {
  if (raw.Length() > static_cast<size_t>(max_bytes)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        method, " request of ", raw.Length(), " bytes; a ", method,
        " request is at most ", max_bytes, " bytes",
        max_bytes == kMaxControlRequestBytes
            ? " (kMaxControlRequestBytes): split the job's variables over "
              "more parameter servers"
            : "; is the caller from another psflow release?"));
  }
  grpc::ByteBuffer copy(raw);  // Deserialize consumes its buffer
  grpc::Status parsed =
      grpc::SerializationTraits<Message>::Deserialize(&copy, out);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        method, " request does not parse: ", parsed.error_message()));
  }
  return absl::OkStatus();
}

template <typename Message>
void SerializeControlResponse(const Message& message, grpc::ByteBuffer* raw) {
  bool own = false;
  grpc::SerializationTraits<Message>::Serialize(message, raw, &own);
}

class GrpcParameterServer::ControlService final : public ControlServiceBase {
 public:
  explicit ControlService(GrpcParameterServer* server) : server_(server) {}

  grpc::ServerUnaryReactor* Configure(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* raw,
                                      grpc::ByteBuffer* raw_response) override {
    absl::StatusOr<std::optional<RpcRole>> caller =
        server_->authorizer().Authorize(*context, kAnyCaller, "Configure");
    if (!caller.ok()) return Done(context, caller.status());
    ConfigureRequest parsed_request;
    if (absl::Status parsed = ParseControlRequest(
            *raw, "Configure", &parsed_request, kMaxSmallControlRequestBytes);
        !parsed.ok()) {
      return Done(context, parsed);
    }
    const ConfigureRequest* request = &parsed_request;
    // A chief's Configure (it carries the chief's incarnation) is fenced;
    // a worker's only checks the settings.
    if (absl::Status fenced = server_->FenceChiefCalls(*context, *caller,
                                                       kAnyCaller, "Configure");
        !fenced.ok()) {
      return Done(context, fenced);
    }
    // Only the chief configures; anyone else may check that its settings
    // are the server's (a worker's handshake), not set them.
    if (caller->has_value() && **caller != RpcRole::kChief &&
        !server_->core().configuration().has_value()) {
      return Done(context,
                  absl::FailedPreconditionError(
                      "this parameter server is not configured yet, and only "
                      "the chief configures it; start the chief first"));
    }
    absl::StatusOr<ConfigureResponse> result =
        server_->core().Configure(*request);
    if (result.ok()) {
      SerializeControlResponse(*result, raw_response);
      LOG(INFO) << "configured: optimizer "
                << OptimizerConfig::Kind_Name(request->optimizer().kind())
                << ", mode " << UpdateMode_Name(request->mode())
                << (request->mode() == SYNC
                        ? absl::StrCat(" (", request->replicas_to_aggregate(),
                                       " of ", request->num_workers(),
                                       " workers)")
                    : request->mode() == BOUNDED
                        ? absl::StrCat(" (max_staleness ",
                                       request->max_staleness(), ", ",
                                       request->num_workers(), " workers)")
                        : "")
                << ", chunks of " << result->chunk_elements() << " floats";
    }
    return Done(context, result.status());
  }

  grpc::ServerUnaryReactor* CreateVariables(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw,
      grpc::ByteBuffer* raw_response) override {
    if (absl::Status allowed =
            server_->Allow(*context, kChiefOnly, "CreateVariables");
        !allowed.ok()) {
      return Done(context, allowed);
    }
    auto request = std::make_unique<CreateVariablesRequest>();
    if (absl::Status parsed =
            ParseControlRequest(*raw, "CreateVariables", request.get());
        !parsed.ok()) {
      return Done(context, parsed);
    }
    SerializeControlResponse(CreateVariablesResponse(), raw_response);
    absl::Status status = server_->core().CreateVariables(*request);
    if (status.ok()) {
      StatsResponse stats = server_->core().Stats();
      std::vector<std::string> averages;
      for (const VariableSpec& spec : request->variables()) {
        if (spec.update() == VariableSpec::MOVING_AVERAGE) {
          averages.push_back(
              absl::StrCat(spec.name(), " (momentum ", spec.momentum(), ")"));
        }
      }
      LOG(INFO) << "holding " << stats.num_variables() << " variables, "
                << stats.total_elements() << " elements"
                << (averages.empty()
                        ? ""
                        : absl::StrCat("; moving averages, not trained: ",
                                       absl::StrJoin(averages, ", ")));
    }
    return Done(context, status);
  }

  grpc::ServerUnaryReactor* Stats(grpc::CallbackServerContext* context,
                                  const grpc::ByteBuffer* raw,
                                  grpc::ByteBuffer* raw_response) override {
    if (absl::Status allowed = server_->Allow(*context, kAnyCaller, "Stats");
        !allowed.ok()) {
      return Done(context, allowed);
    }
    StatsRequest request;
    if (absl::Status parsed = ParseControlRequest(*raw, "Stats", &request,
                                                  kMaxSmallControlRequestBytes);
        !parsed.ok()) {
      return Done(context, parsed);
    }
    SerializeControlResponse(server_->Stats(), raw_response);
    return Done(context, absl::OkStatus());
  }

  grpc::ServerUnaryReactor* AttachSharedMemory(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw,
      grpc::ByteBuffer* raw_response) override {
    absl::StatusOr<std::string> caller =
        server_->AllowCaller(*context, kReaders, "AttachSharedMemory");
    if (!caller.ok()) return Done(context, caller.status());
    AttachSharedMemoryRequest parsed_request;
    if (absl::Status parsed =
            ParseControlRequest(*raw, "AttachSharedMemory", &parsed_request,
                                kMaxSmallControlRequestBytes);
        !parsed.ok()) {
      return Done(context, parsed);
    }
    const AttachSharedMemoryRequest* request = &parsed_request;
    AttachSharedMemoryResponse response_message;
    AttachSharedMemoryResponse* response = &response_message;
    absl::StatusOr<uint64_t> session =
        server_->shared_memory_->Attach(*request, *caller);
    if (session.ok()) {
      response->set_session(*session);
      std::string ring = "";
      if (request->ring_offset() != 0) {
        absl::Status serving = server_->ServeRing(
            *context, *session, static_cast<int64_t>(request->ring_offset()));
        response->set_ring(serving.ok());
        ring = serving.ok()
                   ? ", its calls through a call ring"
                   : absl::StrCat(", its calls over gRPC: ", serving.message());
      }
      LOG(INFO) << "bulk data with " << context->peer()
                << " goes through shared memory ("
                << (request->total_bytes() >= (1 << 20)
                        ? absl::StrCat(request->total_bytes() >> 20, " MiB")
                        : absl::StrCat(request->total_bytes() >> 10, " KiB"))
                << " region" << ring << ")";
    } else {
      LOG(INFO) << "bulk data with " << context->peer()
                << " stays on TCP: " << session.status().message();
    }
    if (session.ok()) SerializeControlResponse(*response, raw_response);
    return Done(context, session.status());
  }

  grpc::ServerUnaryReactor* DetachSharedMemory(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw,
      grpc::ByteBuffer* raw_response) override {
    absl::StatusOr<std::string> caller =
        server_->AllowCaller(*context, kReaders, "DetachSharedMemory");
    if (!caller.ok()) return Done(context, caller.status());
    DetachSharedMemoryRequest request;
    if (absl::Status parsed = ParseControlRequest(
            *raw, "DetachSharedMemory", &request, kMaxSmallControlRequestBytes);
        !parsed.ok()) {
      return Done(context, parsed);
    }
    SerializeControlResponse(DetachSharedMemoryResponse(), raw_response);
    return Done(context,
                server_->shared_memory_->Detach(request.session(), *caller));
  }

  grpc::ServerUnaryReactor* ExcludeWorkers(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw,
      grpc::ByteBuffer* raw_response) override {
    if (absl::Status allowed =
            server_->Allow(*context, kChiefOnly, "ExcludeWorkers");
        !allowed.ok()) {
      return Done(context, allowed);
    }
    ExcludeWorkersRequest request;
    if (absl::Status parsed =
            ParseControlRequest(*raw, "ExcludeWorkers", &request);
        !parsed.ok()) {
      return Done(context, parsed);
    }
    SerializeControlResponse(ExcludeWorkersResponse(), raw_response);
    return Done(context, server_->core().ExcludeWorkers(request));
  }

  grpc::ServerUnaryReactor* Hold(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* raw,
                                 grpc::ByteBuffer* raw_response) override {
    if (absl::Status allowed = server_->Allow(*context, kChiefOnly, "Hold");
        !allowed.ok()) {
      return Done(context, allowed);
    }
    HoldRequest request;
    if (absl::Status parsed = ParseControlRequest(*raw, "Hold", &request,
                                                  kMaxSmallControlRequestBytes);
        !parsed.ok()) {
      return Done(context, parsed);
    }
    absl::StatusOr<HoldResponse> result = server_->HoldWithLease(request);
    if (result.ok()) SerializeControlResponse(*result, raw_response);
    return Done(context, result.status());
  }

  grpc::ServerUnaryReactor* SaveShard(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* raw,
                                      grpc::ByteBuffer* raw_response) override {
    if (absl::Status allowed =
            server_->Allow(*context, kChiefOnly, "SaveShard");
        !allowed.ok()) {
      return Done(context, allowed);
    }
    auto request = std::make_shared<SaveShardRequest>();
    if (absl::Status parsed = ParseControlRequest(
            *raw, "SaveShard", request.get(), kMaxSmallControlRequestBytes);
        !parsed.ok()) {
      return Done(context, parsed);
    }
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    const absl::Time deadline = absl::FromChrono(context->deadline());
    GrpcParameterServer* server = server_;
    server_->ChiefCallStarted();
    server_->RunInBackground(
        [server, reactor, request, raw_response, deadline] {
          const absl::Time start = absl::Now();
          absl::StatusOr<SaveShardResponse> result = psflow::SaveShard(
              server->core(), *request, deadline,
              [server] { return server->shutdown_requested(); },
              server->checkpoint_root());
          if (result.ok()) {
            SerializeControlResponse(*result, raw_response);
            const SaveShardResponse* response = &*result;
            LOG(INFO) << "saved " << response->file_bytes() << " bytes to "
                      << request->path() << " in "
                      << absl::FormatDuration(absl::Trunc(
                             absl::Now() - start, absl::Milliseconds(1)));
          } else {
            LOG(WARNING) << "save to " << request->path()
                         << " failed: " << result.status().message();
          }
          server->ChiefCallEnded();
          reactor->Finish(ToGrpcStatus(result.status()));
        });
    return reactor;
  }

  grpc::ServerUnaryReactor* RestoreShard(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw,
      grpc::ByteBuffer* raw_response) override {
    if (absl::Status allowed =
            server_->Allow(*context, kChiefOnly, "RestoreShard");
        !allowed.ok()) {
      return Done(context, allowed);
    }
    auto request = std::make_shared<RestoreShardRequest>();
    if (absl::Status parsed =
            ParseControlRequest(*raw, "RestoreShard", request.get());
        !parsed.ok()) {
      return Done(context, parsed);
    }
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    GrpcParameterServer* server = server_;
    server_->ChiefCallStarted();
    server_->RunInBackground([server, reactor, request, raw_response] {
      const absl::Time start = absl::Now();
      absl::StatusOr<RestoreShardResponse> result = psflow::RestoreShard(
          server->core(), *request, server->checkpoint_root());
      if (result.ok()) {
        SerializeControlResponse(*result, raw_response);
        const RestoreShardResponse* response = &*result;
        switch (request->phase()) {
          case RestoreShardRequest::COMMIT:
            LOG(INFO) << "restore committed: the variables are replaced";
            break;
          case RestoreShardRequest::ABORT:
            LOG(INFO) << "restore aborted: nothing changed";
            break;
          default:
            LOG(INFO) << (request->phase() == RestoreShardRequest::PREPARE
                              ? "read and checked "
                              : "restored ")
                      << response->bytes_read() << " bytes for step "
                      << request->global_step() << " in "
                      << absl::FormatDuration(absl::Trunc(
                             absl::Now() - start, absl::Milliseconds(1)));
        }
      } else {
        LOG(WARNING) << "restore failed: " << result.status().message();
      }
      server->ChiefCallEnded();
      reactor->Finish(ToGrpcStatus(result.status()));
    });
    return reactor;
  }

  grpc::ServerUnaryReactor* Shutdown(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* raw,
                                     grpc::ByteBuffer* raw_response) override {
    if (absl::Status allowed = server_->Allow(*context, kChiefOnly, "Shutdown");
        !allowed.ok()) {
      return Done(context, allowed);
    }
    ShutdownRequest request;
    if (absl::Status parsed = ParseControlRequest(*raw, "Shutdown", &request,
                                                  kMaxSmallControlRequestBytes);
        !parsed.ok()) {
      return Done(context, parsed);
    }
    SerializeControlResponse(ShutdownResponse(), raw_response);
    server_->RequestShutdown(request.reason().empty()
                                 ? std::string("Shutdown RPC")
                                 : request.reason());
    return Done(context, absl::OkStatus());
  }

 private:
  static grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context,
                                        const absl::Status& status) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }

  GrpcParameterServer* const server_;
};

std::unique_ptr<grpc::Service> GrpcParameterServer::NewControlService(
    GrpcParameterServer* server) {
  return std::make_unique<ControlService>(server);
}

}  // namespace psflow
