// The parameter server's bulk RPCs (common/rpc/bulk_frame.h): one
// reactor per call parses the request frame, hands it to the PsService
// and answers with one frame, over TCP or a shared-memory session.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
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
#include "ps/finite_values.h"
#include "ps/gradient.h"
#include "ps/grpc_ps_server.h"
#include "ps/ps_call_roles.h"
#include "ps/ps_service.h"
#include "ps/shard_checkpoint.h"
#include "ps/shared_memory_calls.h"
#include "ps/shared_memory_sessions.h"

namespace psflow {

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
    // Who calls is known from the call's metadata: a caller that may not
    // make this call is refused before its request (up to the server's
    // receive limit) is read.
    const std::string& method = context_->method();
    const RoleSet& allowed =
        method == kBulkPushBatchMethod || method == kBulkPushRowsMethod
            ? kTrainers
        : method == kBulkAssignMethod ? kChiefOnly
                                      : kReaders;
    absl::StatusOr<std::string> caller =
        server_->AllowCaller(*context_, allowed, method);
    if (!caller.ok()) {
      Reply(caller.status());
      return;
    }
    caller_ = *std::move(caller);
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Reply(absl::InvalidArgumentError("the bulk request carried no message"));
      return;
    }
    request_bytes_ = request_.Length();
    const std::string& method = context_->method();
    if (method == kBulkPullBatchMethod) {
      HandlePull();  // Replies now or once the step is applied.
    } else if (method == kBulkPushBatchMethod) {
      HandlePush();  // Replies now, or with its then_pull's answer.
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
    if (absl::Status allowed = AllowedToTrain(Trains(request)); !allowed.ok()) {
      return Reply(allowed);
    }
    if (absl::Status own = CheckClaimedWorker(caller_, request); !own.ok()) {
      return Reply(own);
    }
    // A pull sends no values: a payload would only be held, unread, for
    // as long as the pull waits for its step.
    if (frame->payload_bytes() != 0) {
      return Reply(absl::InvalidArgumentError(absl::StrCat(
          "a pull carries no payload, this one ", frame->payload_bytes(),
          " bytes; is the client from another psflow release?")));
    }
    request_.Clear();
    StartPull(request);
  }

  // A pull that trains is a trainer's (ps_call_roles.h); the method's own
  // check let every reader through.
  absl::Status AllowedToTrain(bool trains) {
    if (!trains) return absl::OkStatus();
    return server_->Allow(*context_, kTrainers,
                          absl::StrCat(context_->method(), " that trains"));
  }

  // Serves a pull (a PullBatch, or a push's then_pull): answers now or once
  // the step it waits for is applied.
  void StartPull(const PullBatchRequest& request) {
    std::vector<absl::Span<float>> out;
    if (request.has_shared()) {
      absl::StatusOr<SharedPullTarget> target =
          ResolveSharedPull(*service_, *shared_memory_, caller_, request);
      if (!target.ok()) return Reply(target.status());
      shared_ = std::move(target->payload);
      out = std::move(target->pieces);
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

  void SendPull(absl::StatusOr<PsService::PullAnswer> answer) {
    if (!answer.ok()) return Reply(answer.status());
    // A push's then_pull answers inside the push's response.
    const google::protobuf::MessageLite* header = &answer->response;
    if (pushed_.has_value()) {
      *pushed_->mutable_pulled() = std::move(answer->response);
      header = &*pushed_;
    }
    if (shared_.region != nullptr) {
      // The values went into the client's memory; the answer is a header.
      shared_ = {};  // Unmaps once its client detached.
      response_ = EncodeBulkFrame(*header, {}, nullptr);
    } else {
      response_ = EncodeBulkFramePieces(*header, answer->values,
                                        std::move(answer->owner));
    }
    Reply(absl::OkStatus());
  }

  void HandlePush() {
    PushBatchRequest request;
    absl::StatusOr<PushBatchResponse> response = Push(request);
    if (!response.ok()) return Reply(response.status());
    if (!request.has_then_pull()) {
      response_ = EncodeBulkFrame(*response, {}, nullptr);
      return Reply(absl::OkStatus());
    }
    if (absl::Status whole = AppliedWhole(*response); !whole.ok()) {
      return Reply(whole);
    }
    request_.Clear();  // Release gRPC's receive slices early.
    pushed_ = *std::move(response);
    StartPull(request.then_pull());
  }

  // Parses and applies a push; `request` receives its header.
  absl::StatusOr<PushBatchResponse> Push(PushBatchRequest& request) {
    ASSIGN_OR_RETURN(BulkFrame frame, BulkFrame::Parse(request_, request));
    RETURN_IF_ERROR(CheckClaimedWorker(caller_, request));
    if (request.has_shared()) {
      if (frame.payload_bytes() != 0) {
        return absl::InvalidArgumentError(
            "a batch with shared-memory values also carries a payload");
      }
      return PushFromSharedMemory(*service_, *shared_memory_, caller_, request);
    }
    ASSIGN_OR_RETURN(std::vector<ChunkRef> refs,
                     service_->ResolvePush(request));
    int64_t total = 0;
    for (const ChunkRef& ref : refs) total += ref.num_elements;
    return PushFromSlices(request, frame, refs, total);
  }

  // Reads one part's gradient out of a frame's payload, from `offset` on.
  struct PayloadReader {
    const BulkFrame* frame;
    size_t offset;
    void operator()(int64_t begin, absl::Span<float> out) const {
      // The parts were sized against the payload before any is read.
      CHECK(frame->ReadPayload(offset + begin, out).ok());
    }
  };

  // A TCP push: the gradients stay in gRPC's receive slices. The NaN/Inf
  // check reads them there, in one pass and without a copy; the update
  // then reads them block by block into a small per-thread buffer, the
  // block in the cache as it is applied (ps/gradient.h). They are never
  // copied out whole. A batch that fails the check goes to the core
  // unchecked, which finds the bad value, counts and words it.
  absl::StatusOr<PushBatchResponse> PushFromSlices(
      const PushBatchRequest& request, const BulkFrame& frame,
      const std::vector<ChunkRef>& refs, int64_t total) {
    if (frame.payload_floats() != static_cast<size_t>(total)) {
      return absl::InvalidArgumentError(
          absl::StrCat("push of ", refs.size(), " parts starting with \"",
                       request.parts(0).variable(), "\": payload holds ",
                       frame.payload_floats(), " values but the header says ",
                       total, " (truncated or oversized payload)"));
    }
    std::vector<PayloadReader> readers;
    readers.reserve(refs.size());  // The gradients point at them.
    std::vector<Gradient> gradients;
    gradients.reserve(refs.size());
    size_t offset = 0;
    for (const ChunkRef& ref : refs) {
      readers.push_back(PayloadReader{&frame, offset});
      gradients.emplace_back(ref.num_elements,
                             Gradient::Reader(readers.back()));
      offset += static_cast<size_t>(ref.num_elements);
    }
    bool finite = true;
    frame.ForEachPayloadRun([&finite](const char* bytes, size_t floats) {
      finite = finite && AllFiniteAt(bytes, floats);
    });
    return service_->Push(request, refs, gradients,
                          finite ? ParameterServerCore::Finite::kChecked
                                 : ParameterServerCore::Finite::kUnchecked);
  }

  static absl::Status PayloadBesideShared() {
    return absl::InvalidArgumentError(
        "a rows request with its ids and rows in shared memory also carries "
        "a payload");
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
    if (absl::Status allowed = AllowedToTrain(Trains(request)); !allowed.ok()) {
      return Reply(allowed);
    }
    if (absl::Status own = CheckClaimedWorker(caller_, request); !own.ok()) {
      return Reply(own);
    }
    std::vector<absl::Span<const int64_t>> ids;
    std::vector<absl::Span<float>> out;
    if (request.has_shared()) {
      // Ids and rows in the client's region; the answer is a header.
      if (frame->payload_bytes() != 0) return Reply(PayloadBesideShared());
      absl::StatusOr<std::unique_ptr<SharedRows>> rows = ResolveSharedRows(
          *service_, *shared_memory_, caller_, request.protocol_version(),
          request.parts(), request.shared());
      if (!rows.ok()) return Reply(rows.status());
      shared_rows_ = *std::move(rows);
      ids = shared_rows_->part_ids;
      out = shared_rows_->rows;
    } else {
      absl::StatusOr<std::vector<absl::Span<const int64_t>>> read =
          ReadIds(*frame, request.parts(), {});
      if (!read.ok()) return Reply(read.status());
      ids = *std::move(read);
    }
    request_.Clear();  // Release gRPC's receive slices early.
    {
      MutexLock lock(&mu_);
      starting_ = true;
    }
    std::shared_ptr<PsService::PendingRows> pending = service_->PullRows(
        request, std::move(ids), std::move(out),
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
    if (shared_rows_ != nullptr) {
      shared_rows_.reset();  // Unmaps once its client detached.
      response_ = EncodeBulkFrame(answer->response, {}, nullptr);
      return Reply(absl::OkStatus());
    }
    const absl::Span<const float> rows =
        answer->rows->span().subspan(0, answer->num_floats);
    response_ = EncodeBulkFramePieces(answer->response, {rows},
                                      std::move(answer->rows));
    Reply(absl::OkStatus());
  }

  absl::Status HandlePushRows() {
    PushRowsRequest request;
    ASSIGN_OR_RETURN(BulkFrame frame, BulkFrame::Parse(request_, request));
    RETURN_IF_ERROR(CheckClaimedWorker(caller_, request));
    if (request.has_shared()) {
      if (frame.payload_bytes() != 0) return PayloadBesideShared();
      request_.Clear();
      ASSIGN_OR_RETURN(PushRowsResponse response,
                       PushRowsFromSharedMemory(*service_, *shared_memory_,
                                                caller_, request));
      response_ = EncodeBulkFrame(response, {}, nullptr);
      return absl::OkStatus();
    }
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
  // Who called (GrpcParameterServer::AllowCaller): a shared-memory
  // payload must lie in one of its own sessions.
  std::string caller_;
  int64_t request_bytes_ = 0;
  std::atomic<bool> replied_{false};
  // A shared-memory pull's region, held until the answer is sent.
  SharedMemorySessions::Payload shared_;
  // A push with then_pull: its answer, sent with the pull's.
  std::optional<PushBatchResponse> pushed_;
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
  // Or: ids and rows in the client's region.
  std::unique_ptr<SharedRows> shared_rows_;
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

std::unique_ptr<grpc::CallbackGenericService>
GrpcParameterServer::NewBulkService(PsService* service,
                                    SharedMemorySessions* shared_memory,
                                    GrpcParameterServer* server) {
  return std::make_unique<BulkService>(service, shared_memory, server);
}

}  // namespace psflow
