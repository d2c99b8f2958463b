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
#include "ps/shard_checkpoint.h"
#include "ps/shared_memory_sessions.h"

namespace psflow {

// ---- Who may call what (docs/operations.md, "Security") ------------------

namespace {

// The chief (which may also train: worker 0 without a chief job).
const RoleSet kChiefOnly{RpcRole::kChief};
// Pushers: whoever trains.
const RoleSet kTrainers{RpcRole::kChief, RpcRole::kWorker};
// Pullers: trainers and the evaluator.
const RoleSet kReaders{RpcRole::kChief, RpcRole::kWorker, RpcRole::kEvaluator};
// Read-only questions: every role of the job.
const RoleSet kAnyCaller{RpcRole::kChief, RpcRole::kWorker, RpcRole::kEvaluator,
                         RpcRole::kAdmin};

}  // namespace

absl::Status GrpcParameterServer::Allow(const grpc::ServerContextBase& context,
                                        const RoleSet& roles,
                                        absl::string_view method) {
  RETURN_IF_ERROR(authorizer_->Authorize(context, roles, method).status());
  return FenceChiefCalls(context, roles, method);
}

absl::Status GrpcParameterServer::FenceChiefCalls(
    const grpc::ServerContextBase& context, const RoleSet& roles,
    absl::string_view method) {
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
      method, absl::Now());
}

// ---- Control RPCs ----------------------------------------------------------

// The requests whose repeated fields a parser multiplies most (a 2-byte
// VariableSpec becomes about 100 bytes of objects) arrive raw: the caller's
// role is checked and the size bounded before anything is parsed.
using ControlServiceBase =
    ParameterServer::WithRawCallbackMethod_CreateVariables<
        ParameterServer::WithRawCallbackMethod_RestoreShard<
            ParameterServer::WithRawCallbackMethod_ExcludeWorkers<
                ParameterServer::CallbackService>>>;

// `raw` as a `Message`, when it is at most kMaxControlRequestBytes.
template <typename Message>
absl::Status ParseControlRequest(const grpc::ByteBuffer& raw,
                                 absl::string_view method, Message* out) {
  if (raw.Length() > static_cast<size_t>(kMaxControlRequestBytes)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        method, " request of ", raw.Length(),
        " bytes; a control request is "
        "at most ",
        kMaxControlRequestBytes,
        " bytes (kMaxControlRequestBytes): split the job's variables over "
        "more parameter servers"));
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
                                      const ConfigureRequest* request,
                                      ConfigureResponse* response) override {
    absl::StatusOr<std::optional<RpcRole>> caller =
        server_->authorizer().Authorize(*context, kAnyCaller, "Configure");
    if (!caller.ok()) return Done(context, caller.status());
    // A chief's Configure (it carries the chief's incarnation) is fenced;
    // a worker's only checks the settings.
    if (absl::Status fenced =
            server_->FenceChiefCalls(*context, kAnyCaller, "Configure");
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
      *response = *result;
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
                                  const StatsRequest* request,
                                  StatsResponse* response) override {
    if (absl::Status allowed = server_->Allow(*context, kAnyCaller, "Stats");
        !allowed.ok()) {
      return Done(context, allowed);
    }
    *response = server_->Stats();
    return Done(context, absl::OkStatus());
  }

  grpc::ServerUnaryReactor* AttachSharedMemory(
      grpc::CallbackServerContext* context,
      const AttachSharedMemoryRequest* request,
      AttachSharedMemoryResponse* response) override {
    if (absl::Status allowed =
            server_->Allow(*context, kReaders, "AttachSharedMemory");
        !allowed.ok()) {
      return Done(context, allowed);
    }
    absl::StatusOr<uint64_t> session =
        server_->shared_memory_->Attach(*request);
    if (session.ok()) {
      response->set_session(*session);
      LOG(INFO) << "bulk data with " << context->peer()
                << " goes through shared memory ("
                << (request->total_bytes() >= (1 << 20)
                        ? absl::StrCat(request->total_bytes() >> 20, " MiB")
                        : absl::StrCat(request->total_bytes() >> 10, " KiB"))
                << " region)";
    } else {
      LOG(INFO) << "bulk data with " << context->peer()
                << " stays on TCP: " << session.status().message();
    }
    return Done(context, session.status());
  }

  grpc::ServerUnaryReactor* DetachSharedMemory(
      grpc::CallbackServerContext* context,
      const DetachSharedMemoryRequest* request,
      DetachSharedMemoryResponse* response) override {
    if (absl::Status allowed =
            server_->Allow(*context, kReaders, "DetachSharedMemory");
        !allowed.ok()) {
      return Done(context, allowed);
    }
    server_->shared_memory_->Detach(request->session());
    return Done(context, absl::OkStatus());
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
                                 const HoldRequest* request,
                                 HoldResponse* response) override {
    if (absl::Status allowed = server_->Allow(*context, kChiefOnly, "Hold");
        !allowed.ok()) {
      return Done(context, allowed);
    }
    absl::StatusOr<HoldResponse> result = server_->HoldWithLease(*request);
    if (result.ok()) *response = *result;
    return Done(context, result.status());
  }

  grpc::ServerUnaryReactor* SaveShard(grpc::CallbackServerContext* context,
                                      const SaveShardRequest* request,
                                      SaveShardResponse* response) override {
    if (absl::Status allowed =
            server_->Allow(*context, kChiefOnly, "SaveShard");
        !allowed.ok()) {
      return Done(context, allowed);
    }
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    const absl::Time deadline = absl::FromChrono(context->deadline());
    GrpcParameterServer* server = server_;
    server_->ChiefCallStarted();
    server_->RunInBackground([server, reactor, request, response, deadline] {
      const absl::Time start = absl::Now();
      absl::StatusOr<SaveShardResponse> result = psflow::SaveShard(
          server->core(), *request, deadline,
          [server] { return server->shutdown_requested(); },
          server->checkpoint_root());
      if (result.ok()) {
        *response = *std::move(result);
        LOG(INFO) << "saved " << response->file_bytes() << " bytes to "
                  << request->path() << " in "
                  << absl::FormatDuration(absl::Trunc(absl::Now() - start,
                                                      absl::Milliseconds(1)));
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
                                     const ShutdownRequest* request,
                                     ShutdownResponse* response) override {
    if (absl::Status allowed = server_->Allow(*context, kChiefOnly, "Shutdown");
        !allowed.ok()) {
      return Done(context, allowed);
    }
    server_->RequestShutdown(request->reason().empty()
                                 ? std::string("Shutdown RPC")
                                 : request->reason());
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

// ---- Bulk RPCs -------------------------------------------------------------

namespace {

// Serves one bulk RPC: parses the request frame, hands the request to the
// PsService (which holds every rule), answers with one frame. Deletes
// itself when gRPC is done with it (OnDone).
class BulkReactor final : public grpc::ServerGenericBidiReactor {
 public:
  BulkReactor(grpc::GenericCallbackServerContext* context, PsService* service,
              SharedMemorySessions* shared_memory, GrpcParameterServer* server)
      : context_(context),
        service_(service),
        shared_memory_(shared_memory),
        server_(server) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Reply(absl::InvalidArgumentError("the bulk request carried no message"));
      return;
    }
    request_bytes_ = request_.Length();
    const std::string& method = context_->method();
    const RoleSet& allowed =
        method == kBulkPushBatchMethod || method == kBulkPushRowsMethod
            ? kTrainers
        : method == kBulkAssignMethod ? kChiefOnly
                                      : kReaders;
    if (absl::Status authorized = server_->Allow(*context_, allowed, method);
        !authorized.ok()) {
      Reply(authorized);
      return;
    }
    if (method == kBulkPullBatchMethod) {
      HandlePull();  // Replies now or once the step is applied.
    } else if (method == kBulkPushBatchMethod) {
      Reply(HandlePush());
    } else if (method == kBulkAssignMethod) {
      Reply(HandleAssign());
    } else if (method == kBulkPullRowsMethod) {
      HandlePullRows();  // Replies now or once the step is applied.
    } else if (method == kBulkPushRowsMethod) {
      Reply(HandlePushRows());
    } else {
      Reply(absl::UnimplementedError(
          absl::StrCat("unknown method ", method,
                       "; is the client from another psflow release?")));
    }
  }

  // The client's deadline or a broken connection: a waiting pull answers
  // DeadlineExceeded (through its done callback, the last use of `this`).
  void OnCancel() override {
    std::shared_ptr<PsService::PendingPull> pending;
    std::shared_ptr<PsService::PendingRows> pending_rows;
    {
      MutexLock lock(&mu_);
      cancelled_ = true;
      pending = pending_;
      pending_rows = pending_rows_;
    }
    if (pending != nullptr) pending->Cancel();
    if (pending_rows != nullptr) pending_rows->Cancel();
  }

  void OnDone() override { delete this; }

 private:
  void HandlePull() {
    PullBatchRequest request;
    absl::StatusOr<BulkFrame> frame = BulkFrame::Parse(request_, request);
    if (!frame.ok()) return Reply(frame.status());
    std::vector<absl::Span<float>> out;
    if (request.has_shared()) {
      absl::StatusOr<std::vector<absl::Span<float>>> pieces =
          SharedPieces(request.shared(), *frame, request.parts());
      if (!pieces.ok()) return Reply(pieces.status());
      out = *std::move(pieces);
    }
    {
      MutexLock lock(&mu_);
      starting_ = true;
    }
    std::shared_ptr<PsService::PendingPull> pending =
        service_->Pull(request, std::move(out),
                       [this](absl::StatusOr<PsService::PullAnswer> answer) {
                         {
                           MutexLock lock(&mu_);
                           // Answered inside Pull(): replied to below, once
                           // Pull returned.
                           if (starting_) {
                             early_answer_ = std::move(answer);
                             return;
                           }
                         }
                         SendPull(std::move(answer));
                       });
    std::optional<absl::StatusOr<PsService::PullAnswer>> early;
    bool cancel = false;
    {
      MutexLock lock(&mu_);
      starting_ = false;
      early.swap(early_answer_);
      pending_ = pending;
      cancel = cancelled_ && pending != nullptr;
    }
    // Either may be the last use of `this`.
    if (early.has_value()) return SendPull(*std::move(early));
    if (cancel) pending->Cancel();
  }

  // The pieces of the client's shared memory that a batch's values use
  // (one per part, in order), instead of the frame's payload.
  absl::StatusOr<std::vector<absl::Span<float>>> SharedPieces(
      const SharedPayload& shared, const BulkFrame& frame,
      const google::protobuf::RepeatedPtrField<PullRequest>& parts) {
    if (frame.payload_bytes() != 0) {
      return absl::InvalidArgumentError(
          "a batch with shared-memory values also carries a payload");
    }
    // Sizes are bounded before they are summed; the service checks each
    // part against its chunk.
    int64_t total = 0;
    for (const PullRequest& part : parts) {
      if (part.num_elements() <= 0 ||
          part.num_elements() > service_->core().chunk_elements()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "part \"", part.variable(), "\" of ", part.num_elements(),
            " elements is not within one chunk of ",
            service_->core().chunk_elements()));
      }
      total += part.num_elements();
    }
    ASSIGN_OR_RETURN(shared_, shared_memory_->Resolve(
                                  shared, total * int64_t{sizeof(float)}));
    std::vector<absl::Span<float>> pieces;
    int64_t offset = 0;
    for (const PullRequest& part : parts) {
      pieces.push_back(shared_.values.subspan(offset, part.num_elements()));
      offset += part.num_elements();
    }
    return pieces;
  }

  void SendPull(absl::StatusOr<PsService::PullAnswer> answer) {
    if (!answer.ok()) return Reply(answer.status());
    if (shared_.region != nullptr) {
      // The values went into the client's memory; the answer is a header.
      shared_ = {};  // Unmaps once its client detached.
      response_ = EncodeBulkFrame(answer->response, {}, nullptr);
    } else {
      response_ = EncodeBulkFramePieces(answer->response, answer->values,
                                        std::move(answer->owner));
    }
    Reply(absl::OkStatus());
  }

  absl::Status HandlePush() {
    PushBatchRequest request;
    absl::StatusOr<BulkFrame> frame = BulkFrame::Parse(request_, request);
    if (!frame.ok()) return frame.status();
    ASSIGN_OR_RETURN(std::vector<ChunkRef> refs,
                     service_->ResolvePush(request));
    int64_t total = 0;
    for (const ChunkRef& ref : refs) total += ref.num_elements;
    std::shared_ptr<PooledBuffer> values = service_->pool().Acquire(total);
    std::vector<absl::Span<float>> pieces;
    std::vector<absl::Span<const float>> gradients;
    int64_t offset = 0;
    for (const ChunkRef& ref : refs) {
      pieces.push_back(values->span().subspan(offset, ref.num_elements));
      gradients.push_back(pieces.back());
      offset += ref.num_elements;
    }
    if (request.has_shared()) {
      // One copy out of the client's memory, which the client could still
      // change: the NaN/Inf check and the update must see the same values.
      if (frame->payload_bytes() != 0) {
        return absl::InvalidArgumentError(
            "a batch with shared-memory values also carries a payload");
      }
      ASSIGN_OR_RETURN(SharedMemorySessions::Payload shared,
                       shared_memory_->Resolve(request.shared(),
                                               total * int64_t{sizeof(float)}));
      std::memcpy(values->span().data(), shared.values.data(),
                  shared.values.size() * sizeof(float));
    } else if (absl::Status copied = frame->CopyPayload(pieces); !copied.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("push of ", refs.size(), " parts starting with \"",
                       request.parts(0).variable(), "\": ", copied.message()));
    }
    request_.Clear();  // Release gRPC's receive slices early.
    ASSIGN_OR_RETURN(PushBatchResponse response,
                     service_->Push(request, refs, gradients));
    response_ = EncodeBulkFrame(response, {}, nullptr);
    return absl::OkStatus();
  }

  // The ids of a rows request's parts, copied out of the payload into
  // ids_ (bounded before anything is allocated); `floats_after` more
  // payload floats follow them (a push's gradients) into `rest`.
  absl::StatusOr<std::vector<absl::Span<const int64_t>>> ReadIds(
      const BulkFrame& frame,
      const google::protobuf::RepeatedPtrField<RowsPart>& parts,
      absl::Span<float> rest) {
    int64_t total = 0;
    for (const RowsPart& part : parts) {
      if (part.num_ids() < 1 || part.num_ids() > kMaxRowsPerRequest - total) {
        return absl::InvalidArgumentError(absl::StrCat(
            "a rows request part has ", part.num_ids(),
            " ids; every part needs at least one and a request at most ",
            kMaxRowsPerRequest));
      }
      total += part.num_ids();
    }
    ids_.resize(total);
    // The ids travel as little-endian int64: copied bytewise into ids_.
    std::vector<absl::Span<float>> pieces = {
        absl::MakeSpan(reinterpret_cast<float*>(ids_.data()), ids_.size() * 2)};
    if (!rest.empty()) pieces.push_back(rest);
    if (absl::Status copied = frame.CopyPayload(pieces); !copied.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rows request for '", parts.empty() ? "" : parts[0].table(),
          "': ", copied.message()));
    }
    std::vector<absl::Span<const int64_t>> ids;
    int64_t offset = 0;
    for (const RowsPart& part : parts) {
      ids.push_back(absl::MakeConstSpan(ids_).subspan(offset, part.num_ids()));
      offset += part.num_ids();
    }
    return ids;
  }

  void HandlePullRows() {
    PullRowsRequest request;
    absl::StatusOr<BulkFrame> frame = BulkFrame::Parse(request_, request);
    if (!frame.ok()) return Reply(frame.status());
    absl::StatusOr<std::vector<absl::Span<const int64_t>>> ids =
        ReadIds(*frame, request.parts(), {});
    if (!ids.ok()) return Reply(ids.status());
    request_.Clear();  // Release gRPC's receive slices early.
    {
      MutexLock lock(&mu_);
      starting_ = true;
    }
    std::shared_ptr<PsService::PendingRows> pending = service_->PullRows(
        request, *std::move(ids), {},
        [this](absl::StatusOr<PsService::RowsAnswer> answer) {
          {
            MutexLock lock(&mu_);
            if (starting_) {  // Answered inside PullRows: sent below.
              early_rows_answer_ = std::move(answer);
              return;
            }
          }
          SendRows(std::move(answer));
        });
    std::optional<absl::StatusOr<PsService::RowsAnswer>> early;
    bool cancel = false;
    {
      MutexLock lock(&mu_);
      starting_ = false;
      early.swap(early_rows_answer_);
      pending_rows_ = pending;
      cancel = cancelled_ && pending != nullptr;
    }
    // Either may be the last use of `this`.
    if (early.has_value()) return SendRows(*std::move(early));
    if (cancel) pending->Cancel();
  }

  void SendRows(absl::StatusOr<PsService::RowsAnswer> answer) {
    if (!answer.ok()) return Reply(answer.status());
    const absl::Span<const float> rows =
        answer->rows->span().subspan(0, answer->num_floats);
    response_ = EncodeBulkFramePieces(answer->response, {rows},
                                      std::move(answer->rows));
    Reply(absl::OkStatus());
  }

  absl::Status HandlePushRows() {
    PushRowsRequest request;
    ASSIGN_OR_RETURN(BulkFrame frame, BulkFrame::Parse(request_, request));
    ASSIGN_OR_RETURN(std::vector<EmbeddingTable*> tables,
                     service_->ResolvePushRows(request));
    int64_t floats = 0;
    for (int i = 0; i < request.parts_size(); ++i) {
      floats += request.parts(i).num_ids() * tables[i]->dim();
    }
    std::shared_ptr<PooledBuffer> values = service_->pool().Acquire(floats);
    ASSIGN_OR_RETURN(
        std::vector<absl::Span<const int64_t>> ids,
        ReadIds(frame, request.parts(), values->span().subspan(0, floats)));
    request_.Clear();
    std::vector<absl::Span<const float>> gradients;
    int64_t offset = 0;
    for (int i = 0; i < request.parts_size(); ++i) {
      const int64_t n = request.parts(i).num_ids() * tables[i]->dim();
      gradients.push_back(values->span().subspan(offset, n));
      offset += n;
    }
    ASSIGN_OR_RETURN(PushRowsResponse response,
                     service_->PushRows(request, tables, ids, gradients));
    response_ = EncodeBulkFrame(response, {}, nullptr);
    return absl::OkStatus();
  }

  absl::Status HandleAssign() {
    AssignRequest header;
    ASSIGN_OR_RETURN(BulkFrame frame, BulkFrame::Parse(request_, header));
    ASSIGN_OR_RETURN(ChunkRef ref, service_->ResolveAssign(header));
    std::shared_ptr<PooledBuffer> values =
        service_->pool().Acquire(ref.num_elements);
    if (absl::Status copied = frame.CopyPayload(values->span()); !copied.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "assign to \"", header.variable(), "\": ", copied.message()));
    }
    request_.Clear();  // Release gRPC's receive slices early.
    RETURN_IF_ERROR(service_->Assign(ref, values->span()));
    response_ = EncodeBulkFrame(AssignResponse(), {}, nullptr);
    return absl::OkStatus();
  }

  // Answers exactly once; must be the caller's last use of `this`.
  void Reply(const absl::Status& status) {
    if (replied_.exchange(true)) return;
    ParameterServerCore& core = service_->core();
    if (status.ok()) {
      core.CountBytes(request_bytes_, response_.Length());
      StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
    } else {
      core.CountBytes(request_bytes_, 0);
      if (SharedMemorySessions::IsLostSession(status)) {
        context_->AddTrailingMetadata(kSharedMemoryLostKey,
                                      kSharedMemoryLostValue);
      }
      Finish(ToGrpcStatus(status));
    }
  }

  grpc::GenericCallbackServerContext* const context_;
  PsService* const service_;
  SharedMemorySessions* const shared_memory_;
  GrpcParameterServer* const server_;  // who may call (Allow)
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  int64_t request_bytes_ = 0;
  std::atomic<bool> replied_{false};
  // A shared-memory pull's region, held until the answer is sent.
  SharedMemorySessions::Payload shared_;
  Mutex mu_;
  std::shared_ptr<PsService::PendingPull> pending_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  // While the service's Pull() runs: an answer given inside it waits here.
  bool starting_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<absl::StatusOr<PsService::PullAnswer>> early_answer_
      ABSL_GUARDED_BY(mu_);
  // Rows requests: the ids (read by the service until it answers), a
  // waiting rows pull, and an answer given inside PullRows().
  std::vector<int64_t> ids_;
  std::shared_ptr<PsService::PendingRows> pending_rows_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::StatusOr<PsService::RowsAnswer>> early_rows_answer_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace

class GrpcParameterServer::BulkService final
    : public grpc::CallbackGenericService {
 public:
  BulkService(PsService* service, SharedMemorySessions* shared_memory,
              GrpcParameterServer* server)
      : service_(service), shared_memory_(shared_memory), server_(server) {}

  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    return new BulkReactor(context, service_, shared_memory_, server_);
  }

 private:
  PsService* const service_;
  SharedMemorySessions* const shared_memory_;
  GrpcParameterServer* const server_;
};

// ---- Lifecycle -------------------------------------------------------------

absl::StatusOr<std::unique_ptr<GrpcParameterServer>> GrpcParameterServer::Start(
    const Options& options) {
  std::unique_ptr<GrpcParameterServer> server(new GrpcParameterServer);
  server->grace_ = options.grace;
  server->checkpoint_root_ = options.checkpoint_root;
  server->during_drain_for_testing_ = options.during_drain_for_testing;
  server->core_ = std::make_unique<ParameterServerCore>(options.core);
  server->chief_fence_ =
      std::make_unique<ChiefFence>(options.chief_takeover_after);
  // Idle chunk buffers kept for reuse: enough for many in-flight chunks.
  server->pool_ = BufferPool::Create(size_t{256} << 20);
  server->shared_memory_ =
      std::make_unique<SharedMemorySessions>(options.shared_memory);
  server->control_ = std::make_unique<ControlService>(server.get());
  server->service_ =
      std::make_unique<PsService>(server->core_.get(), server->pool_.get());
  server->authorizer_ = std::make_unique<CallAuthorizer>(options.security);
  server->bulk_ = std::make_unique<BulkService>(
      server->service_.get(), server->shared_memory_.get(), server.get());

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
  server->WatchTheChief(options.chief_silence_limit);
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

void GrpcParameterServer::WatchTheChief(absl::Duration limit) {
  RunInBackground([this, limit] {
    // Often enough for hold leases (seconds) and the silence limit alike.
    const absl::Duration poll =
        std::clamp(limit / 10, absl::Milliseconds(10), absl::Milliseconds(100));
    while (!shutdown_requested_.WaitForNotificationWithTimeout(poll)) {
      // None before the first chief (servers start first), nor while a
      // long save or restore of its runs.
      const std::optional<absl::Duration> silent =
          chief_fence_->OwnerSilence(absl::Now());
      if (!silent.has_value()) continue;
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
  MutexLock lock(&mu_);
  return reason_;
}

GrpcParameterServer::~GrpcParameterServer() {
  if (server_ == nullptr) return;
  RequestShutdown("server destroyed");
  Wait();
}

}  // namespace psflow
