#include "client/grpc_ps_shard.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/port_probe.h"
#include "common/rpc/bulk_frame.h"
#include "common/rpc/channel.h"
#include "common/rpc/grpc_status.h"
#include "common/rpc/grpc_tuning.h"
#include "common/task.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "proto/protocol.h"

namespace psflow {
namespace {

constexpr char kAttachSharedMemoryMethod[] =
    "/psflow.ParameterServer/AttachSharedMemory";

}  // namespace

struct GrpcPsShard::BulkCall {
  const char* method = nullptr;
  std::string what;  // "pull of \"w\" [0, 4096)" for errors
  grpc::ByteBuffer request;
  absl::Time deadline;
  bool idempotent = true;
  // Waits for the connection from the first attempt (the shared-memory
  // offer, made before the server may be up).
  bool wait_for_ready = false;
  int64_t bytes = 0;  // tensor bytes, counted against the in-flight budget
  // Pulls that wait for a sync step or a slower worker (bounded staleness)
  // bypass the budget: holding it while waiting would queue the very
  // pushes that end the wait.
  bool bypass_budget = false;
  // The call's values lie in a shared-memory region (no payload either
  // way): never retried here, the decorator decides (shared_memory_shard.h).
  bool shared = false;
  int attempt = 0;
  // Per attempt.
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> reader;
  grpc::ByteBuffer response;
  grpc::Status status;
  // Called once with the final status and response, and whether the
  // server said it forgot the call's shared-memory session.
  std::function<void(const grpc::Status&, const grpc::ByteBuffer&,
                     bool shared_memory_lost)>
      finish;
};

namespace {

// The task a shard named "ps-1 at 10.0.0.3:2222" (or "ps-1") must be: its
// server must present that task's certificate. Empty for other names
// (tools, tests), which any certificate of the job's CA may answer.
std::string ExpectedServer(const std::string& name) {
  std::optional<TaskId> task = ParseTaskName(name.substr(0, name.find(' ')));
  return task.has_value() && task->type == TaskType::kPs ? task->ToString()
                                                         : "";
}

}  // namespace

GrpcPsShard::GrpcPsShard(const std::string& address, std::string name,
                         const Options& options)
    : name_(std::move(name)), address_(address), options_(options) {
  const std::string expected_server = ExpectedServer(name_);
  const int connections = std::max(1, options.connections);
  for (int i = 0; i < connections; ++i) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxBulkMessageBytes);
    args.SetMaxSendMessageSize(kMaxBulkMessageBytes);
    // A private subchannel pool gives each channel its own TCP connection.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
    for (const auto& [name, value] : BulkTransportChannelArgs()) {
      args.SetInt(name, value);
    }
    auto connection = std::make_unique<Connection>();
    connection->channel =
        OpenChannel(address, options.security, args, expected_server);
    connection->stub = std::make_unique<grpc::GenericStub>(connection->channel);
    connections_.push_back(std::move(connection));
  }
  for (auto& connection : connections_) {
    connection->poller = std::thread([this, c = connection.get()] { Poll(c); });
  }
  control_ = ParameterServer::NewStub(connections_[0]->channel);
}

GrpcPsShard::~GrpcPsShard() {
  CancelSharedMemoryOffers();
  {
    MutexLock lock(&mu_);
    mu_.Await(Condition(
        +[](int* n) { return *n == 0; }, &in_flight_));
  }
  for (auto& connection : connections_) connection->queue.Shutdown();
  for (auto& connection : connections_) connection->poller.join();
}

void GrpcPsShard::OfferSharedMemory(
    const AttachSharedMemoryRequest& request,
    std::function<void(absl::StatusOr<AttachSharedMemoryResponse>)> done) {
  // The control method goes as a generic call so that it completes on a
  // poller like every bulk call (see the destructor's order).
  auto* call = new BulkCall;
  call->method = kAttachSharedMemoryMethod;
  call->what = "shared memory with " + name_;
  bool own_buffer = false;
  grpc::SerializationTraits<AttachSharedMemoryRequest>::Serialize(
      request, &call->request, &own_buffer);
  call->deadline = absl::Now() + absl::Minutes(10);
  call->idempotent = false;
  call->wait_for_ready = true;  // made before the server may be up
  call->bypass_budget = true;
  call->finish = [this, call, done = std::move(done)](
                     const grpc::Status& status, const grpc::ByteBuffer& answer,
                     bool) {
    {
      MutexLock lock(&offers_mu_);
      offers_.erase(call);
    }
    if (!status.ok()) return done(FromGrpcStatus(status, call->what));
    AttachSharedMemoryResponse response;
    grpc::ByteBuffer copy(answer);  // Deserialize consumes its buffer.
    if (!grpc::SerializationTraits<AttachSharedMemoryResponse>::Deserialize(
             &copy, &response)
             .ok()) {
      return done(absl::InternalError(
          absl::StrCat(call->what, ": the server's answer is garbled")));
    }
    done(std::move(response));
  };
  // Registered and sent under the lock, so a cancel finds its context.
  MutexLock lock(&offers_mu_);
  offers_.insert(call);
  StartBulk(call);
}

void GrpcPsShard::CancelInFlight() {
  MutexLock lock(&mu_);
  for (BulkCall* call : started_) call->context->TryCancel();
  for (grpc::ClientContext* context : control_calls_) context->TryCancel();
}

void GrpcPsShard::Close() {
  {
    MutexLock lock(&mu_);
    closed_ = true;
  }
  CancelInFlight();
}

void GrpcPsShard::CancelSharedMemoryOffers() {
  MutexLock lock(&offers_mu_);
  for (BulkCall* call : offers_) call->context->TryCancel();
}

void GrpcPsShard::DetachSharedMemory(uint64_t session, absl::Time deadline) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  DetachSharedMemoryRequest request;
  request.set_session(session);
  DetachSharedMemoryResponse response;
  // Best effort: a server that is gone forgets the session anyway.
  (void)control_->DetachSharedMemory(&context, request, &response);
}

void GrpcPsShard::Poll(Connection* connection) {
  void* tag = nullptr;
  bool ok = false;
  while (connection->queue.Next(&tag, &ok)) {
    auto* call = static_cast<BulkCall*>(tag);
    if (call->status.error_code() == grpc::StatusCode::UNAVAILABLE &&
        call->idempotent && !call->shared &&
        call->attempt < options_.max_attempts && absl::Now() < call->deadline) {
      Send(call);
      continue;
    }
    const int64_t bytes = call->bytes;
    bool shared_memory_lost = false;
    if (!call->status.ok()) {
      const auto& trailers = call->context->GetServerTrailingMetadata();
      auto it = trailers.find(kSharedMemoryLostKey);
      shared_memory_lost =
          it != trailers.end() &&
          it->second == grpc::string_ref(kSharedMemoryLostValue);
    }
    // The request's slices hold the caller's buffer (a shared-memory piece,
    // a gradient buffer): released before the caller hears the outcome.
    call->request.Clear();
    call->finish(call->status, call->response, shared_memory_lost);
    {
      MutexLock lock(&mu_);
      started_.erase(call);
    }
    delete call;
    std::vector<BulkCall*> ready;
    {
      MutexLock lock(&mu_);
      --in_flight_;
      in_flight_bytes_ -= bytes;
      while (!queued_.empty() && (in_flight_bytes_ == 0 ||
                                  in_flight_bytes_ + queued_.front()->bytes <=
                                      options_.max_in_flight_bytes)) {
        in_flight_bytes_ += queued_.front()->bytes;
        ready.push_back(queued_.front());
        queued_.pop_front();
      }
    }
    for (BulkCall* next : ready) Send(next);
  }
}

// Idempotent control calls wait for the connection (until the deadline)
// instead of failing fast: that is the retry of Unavailable. Registered
// while they run, so that CancelInFlight ends a task's wait for a server
// that is gone (a worker configuring its client when the job failed).
GrpcPsShard::ControlCall::ControlCall(GrpcPsShard* shard, absl::Time deadline)
    : shard_(shard) {
  context_.set_deadline(absl::ToChronoTime(deadline));
  context_.set_wait_for_ready(true);
  MutexLock lock(&shard_->mu_);
  // A context cancelled before its call starts cancels the call as it does.
  if (shard_->closed_) context_.TryCancel();
  shard_->control_calls_.insert(&context_);
}

GrpcPsShard::ControlCall::~ControlCall() {
  MutexLock lock(&shard_->mu_);
  shard_->control_calls_.erase(&context_);
}

namespace {

std::string Range(const std::string& variable, int64_t offset, int64_t n) {
  return absl::StrCat("\"", variable, "\" [", offset, ", ", offset + n, ")");
}

}  // namespace

absl::StatusOr<ConfigureResponse> GrpcPsShard::Configure(
    const ConfigureRequest& request, absl::Time deadline) {
  ConfigureResponse response;
  ControlCall context(this, deadline);
  grpc::Status status = control_->Configure(context.get(), request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "configure " + name_);
  return response;
}

absl::Status GrpcPsShard::CreateVariables(const CreateVariablesRequest& request,
                                          absl::Time deadline) {
  CreateVariablesResponse response;
  ControlCall context(this, deadline);
  return FromGrpcStatus(
      control_->CreateVariables(context.get(), request, &response),
      "create variables on " + name_);
}

absl::StatusOr<StatsResponse> GrpcPsShard::Stats(absl::Time deadline) {
  StatsResponse response;
  ControlCall context(this, deadline);
  grpc::Status status =
      control_->Stats(context.get(), StatsRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status, "stats of " + name_);
  return response;
}

absl::Status GrpcPsShard::Shutdown(const std::string& reason,
                                   absl::Time deadline) {
  ShutdownRequest request;
  request.set_reason(reason);
  ShutdownResponse response;
  {
    // First without waiting for the connection: a server whose port
    // refuses connections is gone (killed, its pod deleted), and waiting
    // for it only held the job's end for the whole deadline.
    ControlCall context(this, deadline);
    context.get()->set_wait_for_ready(false);
    grpc::Status status = control_->Shutdown(context.get(), request, &response);
    // The channel's error can be older than the server (it was dialed
    // before it listened): gone only when its port refuses now.
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE ||
        ConnectionRefused(address_, absl::Seconds(1))) {
      return FromGrpcStatus(status, "shut down " + name_);
    }
  }
  // Unavailable for another reason (a connection being made, a moment's
  // trouble): wait for it, up to the deadline.
  ControlCall context(this, deadline);
  return FromGrpcStatus(control_->Shutdown(context.get(), request, &response),
                        "shut down " + name_);
}

absl::Status GrpcPsShard::ExcludeWorkers(const ExcludeWorkersRequest& request,
                                         absl::Time deadline) {
  ExcludeWorkersResponse response;
  ControlCall context(this, deadline);
  return FromGrpcStatus(
      control_->ExcludeWorkers(context.get(), request, &response),
      "update the bounded-staleness workers on " + name_);
}

absl::StatusOr<HoldResponse> GrpcPsShard::Hold(const HoldRequest& request,
                                               absl::Time deadline) {
  HoldResponse response;
  ControlCall context(this, deadline);
  grpc::Status status = control_->Hold(context.get(), request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "hold updates on " + name_);
  return response;
}

absl::StatusOr<SaveShardResponse> GrpcPsShard::SaveShard(
    const SaveShardRequest& request, absl::Time deadline) {
  SaveShardResponse response;
  ControlCall context(this, deadline);
  grpc::Status status = control_->SaveShard(context.get(), request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "save on " + name_);
  return response;
}

absl::StatusOr<RestoreShardResponse> GrpcPsShard::RestoreShard(
    const RestoreShardRequest& request, absl::Time deadline) {
  RestoreShardResponse response;
  ControlCall context(this, deadline);
  grpc::Status status =
      control_->RestoreShard(context.get(), request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "restore on " + name_);
  return response;
}

void GrpcPsShard::StartBulk(BulkCall* call) {
  {
    MutexLock lock(&mu_);
    ++in_flight_;
    if (call->bypass_budget) {
      call->bytes = 0;
    } else
      // One call always goes, however large; the rest wait their turn.
      if (!queued_.empty() ||
          (in_flight_bytes_ > 0 &&
           in_flight_bytes_ + call->bytes > options_.max_in_flight_bytes)) {
        queued_.push_back(call);
        return;
      }
    in_flight_bytes_ += call->bytes;
  }
  Send(call);
}

void GrpcPsShard::Send(BulkCall* call) {
  ++call->attempt;
  {
    // Under the lock: CancelInFlight may be cancelling the old context.
    MutexLock lock(&mu_);
    call->context = std::make_unique<grpc::ClientContext>();
    if (closed_) call->context->TryCancel();  // cancelled as it starts
    started_.insert(call);
  }
  call->context->set_deadline(absl::ToChronoTime(call->deadline));
  // Retries wait for the connection to come back rather than failing fast.
  call->context->set_wait_for_ready(call->wait_for_ready || call->attempt > 1);
  call->response.Clear();
  call->status = grpc::Status();
  Connection& connection =
      *connections_[next_connection_.fetch_add(1) % connections_.size()];
  call->reader = connection.stub->PrepareUnaryCall(
      call->context.get(), call->method, call->request, &connection.queue);
  call->reader->StartCall();
  call->reader->Finish(&call->response, &call->status, call);
}

namespace {

// "\"b1\" [0, 256) and 3 more": a batch, for errors.
template <typename Parts>
std::string BatchRange(const Parts& parts) {
  std::string what = Range(parts[0].variable(), parts[0].offset_elements(),
                           parts[0].num_elements());
  if (parts.size() > 1)
    absl::StrAppend(&what, " and ", parts.size() - 1, " more");
  return what;
}

// Tensor bytes a batch moves (its parts' elements), for the in-flight
// budget.
template <typename Header>
int64_t BatchBytes(const Header& header) {
  int64_t elements = 0;
  for (const auto& part : header.parts()) elements += part.num_elements();
  return elements * static_cast<int64_t>(sizeof(float));
}

// A failed call's status; marked when the server forgot the call's
// shared-memory session (nothing was applied).
absl::Status CallError(const grpc::Status& status, const std::string& what,
                       bool shared_memory_lost) {
  absl::Status error = FromGrpcStatus(status, what);
  return shared_memory_lost ? MarkSharedMemoryLost(std::move(error)) : error;
}

// InternalError unless the server answered one entry (a version, a
// result) per part of the request.
absl::Status AnsweredEveryPart(const std::string& what, int answered,
                               int parts) {
  if (answered == parts) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": the server answered ",
                                          answered, " parts for ", parts));
}

// A pull's values from its answer's frame into `out`; a shared-memory
// pull's are in the region (the decorator copies them out), so its frame
// must carry none.
absl::Status ReadPulledValues(const std::string& what, bool shared,
                              const BulkFrame& frame,
                              const std::vector<absl::Span<float>>& out) {
  if (shared) {
    if (frame.payload_bytes() == 0) return absl::OkStatus();
    return absl::InternalError(absl::StrCat(
        what, ": the server answered a shared-memory pull with a payload"));
  }
  absl::Status copied = frame.CopyPayload(out);
  if (copied.ok()) return copied;
  return absl::Status(copied.code(),
                      absl::StrCat(what, ": ", copied.message()));
}

}  // namespace

namespace {

// "rows of 'emb' (4096 ids) and 1 more table": a rows call in messages.
std::string RowsWhat(
    const google::protobuf::RepeatedPtrField<RowsPart>& parts) {
  if (parts.empty()) return "rows of no table";
  return absl::StrCat(
      "rows of '", parts[0].table(), "' (", parts[0].num_ids(), " ids)",
      parts.size() > 1 ? absl::StrCat(" and ", parts.size() - 1, " more tables")
                       : "");
}

// The ids of every part, as the float pieces a frame carries (int64 ids
// are sent as their bytes).
std::vector<absl::Span<const float>> IdPieces(
    const std::vector<absl::Span<const int64_t>>& ids) {
  std::vector<absl::Span<const float>> pieces;
  for (absl::Span<const int64_t> part : ids) {
    pieces.push_back(absl::MakeConstSpan(
        reinterpret_cast<const float*>(part.data()), part.size() * 2));
  }
  return pieces;
}

}  // namespace

void GrpcPsShard::PullRows(
    const PullRowsRequest& header, std::vector<absl::Span<const int64_t>> ids,
    std::vector<absl::Span<float>> out, absl::Time deadline,
    std::function<void(absl::StatusOr<PullRowsResponse>)> done) {
  auto* call = new BulkCall;
  call->method = kBulkPullRowsMethod;
  call->what =
      absl::StrCat("pull of ", RowsWhat(header.parts()), " from ", name_);
  // The caller keeps the ids until `done`, so they are sent in place.
  call->request = EncodeBulkFramePieces(header, IdPieces(ids), nullptr);
  int64_t bytes = 0;
  for (absl::Span<float> o : out) bytes += o.size() * sizeof(float);
  call->bytes = bytes;
  call->bypass_budget = header.min_version() > 0;
  call->deadline = deadline;
  call->finish = [what = call->what, parts = header.parts_size(),
                  out = std::move(out),
                  done = std::move(done)](const grpc::Status& status,
                                          const grpc::ByteBuffer& response,
                                          bool shared_memory_lost) {
    if (!status.ok()) return done(CallError(status, what, shared_memory_lost));
    PullRowsResponse answer;
    absl::StatusOr<BulkFrame> frame = BulkFrame::Parse(response, answer);
    if (!frame.ok()) return done(frame.status());
    if (absl::Status all =
            AnsweredEveryPart(what, answer.versions_size(), parts);
        !all.ok()) {
      return done(all);
    }
    if (absl::Status copied = frame->CopyPayload(out); !copied.ok()) {
      return done(absl::Status(copied.code(),
                               absl::StrCat(what, ": ", copied.message())));
    }
    done(std::move(answer));
  };
  StartBulk(call);
}

void GrpcPsShard::PushRows(
    const PushRowsRequest& header, std::vector<absl::Span<const int64_t>> ids,
    std::vector<absl::Span<const float>> gradients,
    std::shared_ptr<const void> owner, absl::Time deadline,
    std::function<void(absl::StatusOr<PushRowsResponse>)> done) {
  auto* call = new BulkCall;
  call->method = kBulkPushRowsMethod;
  call->what =
      absl::StrCat("push of ", RowsWhat(header.parts()), " to ", name_);
  std::vector<absl::Span<const float>> pieces = IdPieces(ids);
  int64_t bytes = 0;
  for (absl::Span<const float> g : gradients) {
    pieces.push_back(g);
    bytes += g.size() * sizeof(float);
  }
  call->request = EncodeBulkFramePieces(header, pieces, std::move(owner));
  call->bytes = bytes;
  call->deadline = deadline;
  // An async push that reached the server must not be applied twice.
  call->idempotent = false;
  call->finish = [what = call->what, parts = header.parts_size(),
                  done = std::move(done)](const grpc::Status& status,
                                          const grpc::ByteBuffer& response,
                                          bool shared_memory_lost) {
    if (!status.ok()) {
      return done(CallError(status, what, shared_memory_lost));
    }
    PushRowsResponse answer;
    absl::StatusOr<BulkFrame> frame = BulkFrame::Parse(response, answer);
    if (!frame.ok()) return done(frame.status());
    if (absl::Status all =
            AnsweredEveryPart(what, answer.results_size(), parts);
        !all.ok()) {
      return done(all);
    }
    done(std::move(answer));
  };
  StartBulk(call);
}

void GrpcPsShard::PullBatch(
    const PullBatchRequest& header, std::vector<absl::Span<float>> out,
    absl::Time deadline,
    std::function<void(absl::StatusOr<PullBatchResponse>)> done) {
  auto* call = new BulkCall;
  call->method = kBulkPullBatchMethod;
  call->what = header.parts().empty()
                   ? "pull of an empty batch from " + name_
                   : absl::StrCat("pull of ", BatchRange(header.parts()),
                                  " from ", name_);
  call->shared = header.has_shared();
  call->request = EncodeBulkFrame(header, {}, nullptr);
  call->bytes = BatchBytes(header);
  // Pulls that may wait (a sync step, a slower worker) bypass the budget.
  call->bypass_budget = header.min_version() > 0 || header.has_worker_clock();
  call->deadline = deadline;
  call->finish = [what = call->what, shared = call->shared,
                  parts = header.parts_size(), out = std::move(out),
                  done = std::move(done)](const grpc::Status& status,
                                          const grpc::ByteBuffer& response,
                                          bool shared_memory_lost) {
    if (!status.ok()) return done(CallError(status, what, shared_memory_lost));
    PullBatchResponse answer;
    absl::StatusOr<BulkFrame> frame = BulkFrame::Parse(response, answer);
    if (!frame.ok()) return done(frame.status());
    if (absl::Status all =
            AnsweredEveryPart(what, answer.versions_size(), parts);
        !all.ok()) {
      return done(all);
    }
    if (absl::Status read = ReadPulledValues(what, shared, *frame, out);
        !read.ok()) {
      return done(read);
    }
    done(std::move(answer));
  };
  StartBulk(call);
}

void GrpcPsShard::PushBatch(
    const PushBatchRequest& header, std::vector<absl::Span<const float>> data,
    std::shared_ptr<const void> owner, absl::Time deadline,
    std::function<void(absl::StatusOr<PushBatchResponse>)> done) {
  auto* call = new BulkCall;
  call->method = kBulkPushBatchMethod;
  call->what =
      header.parts().empty()
          ? "push of an empty batch to " + name_
          : absl::StrCat("push to ", BatchRange(header.parts()), " on ", name_);
  call->shared = header.has_shared();
  // With shared memory the values are in the region: the frame is a header.
  call->request = call->shared
                      ? EncodeBulkFrame(header, {}, nullptr)
                      : EncodeBulkFramePieces(header, data, std::move(owner));
  call->bytes = BatchBytes(header);
  call->deadline = deadline;
  // An async push that reached the server must not be applied twice.
  call->idempotent = false;
  call->finish = [what = call->what, parts = header.parts_size(),
                  done = std::move(done)](const grpc::Status& status,
                                          const grpc::ByteBuffer& response,
                                          bool shared_memory_lost) {
    if (!status.ok()) return done(CallError(status, what, shared_memory_lost));
    PushBatchResponse answer;
    absl::StatusOr<BulkFrame> frame = BulkFrame::Parse(response, answer);
    if (!frame.ok()) return done(frame.status());
    if (absl::Status all =
            AnsweredEveryPart(what, answer.results_size(), parts);
        !all.ok()) {
      return done(all);
    }
    done(std::move(answer));
  };
  StartBulk(call);
}

void GrpcPsShard::PushThenPull(
    const PushBatchRequest& header, std::vector<absl::Span<const float>> data,
    std::shared_ptr<const void> owner, std::vector<absl::Span<float>> out,
    absl::Time deadline,
    std::function<void(absl::StatusOr<PushBatchResponse>)> done) {
  auto* call = new BulkCall;
  call->method = kBulkPushBatchMethod;
  call->what = header.parts().empty()
                   ? "push and pull of an empty batch on " + name_
                   : absl::StrCat("push and pull of ",
                                  BatchRange(header.parts()), " on ", name_);
  const PullBatchRequest& pull = header.then_pull();
  call->shared = header.has_shared() || pull.has_shared();
  call->request = header.has_shared()
                      ? EncodeBulkFrame(header, {}, nullptr)
                      : EncodeBulkFramePieces(header, data, std::move(owner));
  call->bytes = BatchBytes(header) + BatchBytes(pull);
  // A pull that may wait (a sync step, a slower worker) bypasses the budget.
  call->bypass_budget = pull.min_version() > 0 || pull.has_worker_clock();
  call->deadline = deadline;
  // An async push that reached the server must not be applied twice.
  call->idempotent = false;
  call->finish = [what = call->what, parts = header.parts_size(),
                  pull_parts = pull.parts_size(),
                  pull_shared = pull.has_shared(), out = std::move(out),
                  done = std::move(done)](const grpc::Status& status,
                                          const grpc::ByteBuffer& response,
                                          bool shared_memory_lost) {
    if (!status.ok()) return done(CallError(status, what, shared_memory_lost));
    PushBatchResponse answer;
    absl::StatusOr<BulkFrame> frame = BulkFrame::Parse(response, answer);
    if (!frame.ok()) return done(frame.status());
    if (answer.results_size() != parts ||
        answer.pulled().versions_size() != pull_parts) {
      return done(absl::InternalError(absl::StrCat(
          what, ": the server answered ", answer.results_size(), " and ",
          answer.pulled().versions_size(), " parts for ", parts, " and ",
          pull_parts, " (a server from a release without then_pull?)")));
    }
    if (absl::Status read = ReadPulledValues(what, pull_shared, *frame, out);
        !read.ok()) {
      return done(read);
    }
    done(std::move(answer));
  };
  StartBulk(call);
}

void GrpcPsShard::Assign(const AssignRequest& header,
                         absl::Span<const float> data,
                         std::shared_ptr<const void> owner, absl::Time deadline,
                         std::function<void(absl::Status)> done) {
  auto* call = new BulkCall;
  call->method = kBulkAssignMethod;
  call->what = absl::StrCat(
      "assign to ",
      Range(header.variable(), header.offset_elements(), header.num_elements()),
      " on ", name_);
  call->request = EncodeBulkFrame(header, data, std::move(owner));
  call->bytes = static_cast<int64_t>(data.size() * sizeof(float));
  call->deadline = deadline;
  call->finish = [what = call->what, done = std::move(done)](
                     const grpc::Status& status, const grpc::ByteBuffer&,
                     bool) { done(FromGrpcStatus(status, what)); };
  StartBulk(call);
}

}  // namespace psflow
