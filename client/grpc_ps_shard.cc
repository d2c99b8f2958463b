#include "client/grpc_ps_shard.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/rpc/bulk_frame.h"
#include "common/rpc/channel.h"
#include "common/rpc/grpc_status.h"
#include "common/rpc/grpc_tuning.h"
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
  // Pulls that wait for a sync step bypass the budget: holding it while
  // waiting would queue the very pushes that complete the step.
  bool bypass_budget = false;
  // The shared memory holding the call's values, if any (owned by finish).
  SharedLease* lease = nullptr;
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

// Bytes of the shared region reserved for one call; freed when the last
// holder (the call, or a TCP resend's frame) lets go.
struct GrpcPsShard::SharedLease {
  SharedLease(std::shared_ptr<SharedMemoryArena> arena, uint64_t session,
              int64_t offset, int64_t bytes)
      : arena(std::move(arena)),
        session(session),
        offset(offset),
        bytes(bytes) {}
  // A retired piece is never handed out again: the server may still write
  // (a pull) or read (a push) it after the client gave up on the call.
  ~SharedLease() {
    if (!retired) arena->Free(offset);
  }
  float* values() const { return reinterpret_cast<float*>(arena->at(offset)); }
  SharedPayload payload() const {
    SharedPayload payload;
    payload.set_session(session);
    payload.set_offset(static_cast<uint64_t>(offset));
    payload.set_bytes(static_cast<uint64_t>(bytes));
    return payload;
  }

  const std::shared_ptr<SharedMemoryArena> arena;
  const uint64_t session;
  const int64_t offset;
  const int64_t bytes;
  bool retired = false;  // set on the call's poller thread only
};

namespace {

// Statuses that may be the client's own (deadline, cancel, broken
// connection) while the server still works on the call.
bool ServerMayStillUse(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::DATA_LOSS:
      return true;
    default:
      return false;
  }
}

}  // namespace

GrpcPsShard::GrpcPsShard(const std::string& address, std::string name,
                         const Options& options)
    : name_(std::move(name)), options_(options) {
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
    connection->channel = OpenChannel(address, options.security, args);
    connection->stub = std::make_unique<grpc::GenericStub>(connection->channel);
    connections_.push_back(std::move(connection));
  }
  for (auto& connection : connections_) {
    connection->poller = std::thread([this, c = connection.get()] { Poll(c); });
  }
  control_ = ParameterServer::NewStub(connections_[0]->channel);
  if (options.shared_memory_bytes > 0) {
    const int64_t bytes = (options.shared_memory_bytes + 4095) / 4096 * 4096;
    absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> region =
        SharedMemoryRegion::Create(bytes);
    if (region.ok()) {
      MutexLock lock(&shared_mu_);
      arena_ = std::make_shared<SharedMemoryArena>(*std::move(region));
      StartAttach();
    } else {
      LOG(INFO) << "bulk data with " << name_
                << " stays on TCP: " << region.status().message();
    }
  }
}

GrpcPsShard::~GrpcPsShard() {
  {
    MutexLock lock(&shared_mu_);
    closing_ = true;
    if (attach_call_ != nullptr) attach_call_->context->TryCancel();
  }
  {
    MutexLock lock(&mu_);
    mu_.Await(Condition(
        +[](int* n) { return *n == 0; }, &in_flight_));
  }
  uint64_t session = 0;
  {
    MutexLock lock(&shared_mu_);
    session = session_;
  }
  if (session != 0) {
    // Best effort: a server that is gone forgets the session anyway.
    grpc::ClientContext context;
    context.set_deadline(
        absl::ToChronoTime(absl::Now() + absl::Milliseconds(500)));
    DetachSharedMemoryRequest request;
    request.set_session(session);
    DetachSharedMemoryResponse response;
    control_->DetachSharedMemory(&context, request, &response);
  }
  for (auto& connection : connections_) connection->queue.Shutdown();
  for (auto& connection : connections_) connection->poller.join();
}

void GrpcPsShard::StartAttach() {
  shared_state_ = SharedState::kAttaching;
  AttachSharedMemoryRequest request;
  request.set_protocol_version(kProtocolVersion);
  request.set_pid(getpid());
  request.set_fd(arena_->region().fd());
  request.set_total_bytes(arena_->region().total_bytes());
  request.set_token(arena_->region().token());
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
  call->wait_for_ready = true;
  call->bypass_budget = true;
  call->finish = [this](const grpc::Status& status,
                        const grpc::ByteBuffer& answer, bool) {
    AttachSharedMemoryResponse response;
    grpc::ByteBuffer copy(answer);  // Deserialize consumes its buffer.
    const bool parsed =
        status.ok() &&
        grpc::SerializationTraits<AttachSharedMemoryResponse>::Deserialize(
            &copy, &response)
            .ok() &&
        response.session() != 0;
    MutexLock lock(&shared_mu_);
    attach_call_ = nullptr;
    if (parsed) {
      // Kept even when closing, so that the destructor detaches it.
      session_ = response.session();
      shared_state_ = SharedState::kAttached;
      if (!closing_) {
        LOG(INFO) << "bulk data with " << name_
                  << " goes through shared memory";
      }
      return;
    }
    shared_state_ = SharedState::kOff;
    if (!closing_) {
      LOG(INFO) << "bulk data with " << name_ << " stays on TCP: "
                << (status.ok() ? "the server's answer is garbled"
                                : status.error_message());
    }
  };
  attach_call_ = call;
  StartBulk(call);
}

std::shared_ptr<GrpcPsShard::SharedLease> GrpcPsShard::LeaseSharedMemory(
    int64_t bytes) {
  if (bytes <= 0) return nullptr;
  uint64_t session = 0;
  std::shared_ptr<SharedMemoryArena> arena;
  {
    MutexLock lock(&shared_mu_);
    if (shared_state_ != SharedState::kAttached) return nullptr;
    session = session_;
    arena = arena_;
  }
  std::optional<int64_t> offset = arena->Allocate(bytes);
  if (!offset.has_value()) return nullptr;  // Full: this call takes TCP.
  return std::make_shared<SharedLease>(std::move(arena), session, *offset,
                                       bytes);
}

void GrpcPsShard::RetirePiece(SharedLease& lease, const BulkCall& call) {
  lease.retired = true;
  LOG(WARNING) << call.what << " ended with " << call.status.error_message()
               << "; keeping its " << lease.bytes
               << " bytes of shared memory out of use, as the server may "
                  "still be using them";
  if (lease.arena->CountRetired(lease.bytes) * 2 <= lease.arena->capacity()) {
    return;
  }
  MutexLock lock(&shared_mu_);
  if (closing_ || arena_ != lease.arena ||
      shared_state_ != SharedState::kAttached) {
    return;  // Already replaced, being re-attached, or shutting down.
  }
  absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> region =
      SharedMemoryRegion::Create(arena_->capacity());
  if (!region.ok()) return;  // Keep the old one: its free pieces still work.
  LOG(WARNING) << "half of the shared memory with " << name_
               << " is held by calls that failed; offering a fresh region";
  // The old region lives on while calls hold pieces of it; the server
  // forgets its session once idle.
  arena_ = std::make_shared<SharedMemoryArena>(*std::move(region));
  session_ = 0;
  StartAttach();
}

void GrpcPsShard::OnSharedMemoryLost(uint64_t session) {
  MutexLock lock(&shared_mu_);
  if (closing_ || shared_state_ != SharedState::kAttached ||
      session_ != session) {
    return;  // Already handled, or shutting down.
  }
  LOG(WARNING) << name_ << " forgot our shared memory (it restarted?); "
               << "offering it again, and resending over TCP meanwhile";
  session_ = 0;
  StartAttach();
}

int64_t GrpcPsShard::shared_memory_bytes_held() const {
  MutexLock lock(&shared_mu_);
  return arena_ == nullptr ? 0 : arena_->used_bytes();
}

bool GrpcPsShard::WaitForSharedMemory(absl::Duration timeout) {
  MutexLock lock(&shared_mu_);
  shared_mu_.AwaitWithTimeout(
      Condition(
          +[](SharedState* state) { return *state != SharedState::kAttaching; },
          &shared_state_),
      timeout);
  return shared_state_ == SharedState::kAttached;
}

void GrpcPsShard::Poll(Connection* connection) {
  void* tag = nullptr;
  bool ok = false;
  while (connection->queue.Next(&tag, &ok)) {
    auto* call = static_cast<BulkCall*>(tag);
    if (call->status.error_code() == grpc::StatusCode::UNAVAILABLE &&
        call->idempotent && call->lease == nullptr &&
        call->attempt < options_.max_attempts && absl::Now() < call->deadline) {
      Send(call);
      continue;
    }
    const int64_t bytes = call->bytes;
    if (call->lease != nullptr && !call->status.ok() &&
        ServerMayStillUse(call->status.error_code()) && !call->lease->retired) {
      RetirePiece(*call->lease, *call);
    }
    bool shared_memory_lost = false;
    if (!call->status.ok()) {
      const auto& trailers = call->context->GetServerTrailingMetadata();
      auto it = trailers.find(kSharedMemoryLostKey);
      shared_memory_lost =
          it != trailers.end() &&
          it->second == grpc::string_ref(kSharedMemoryLostValue);
    }
    call->finish(call->status, call->response, shared_memory_lost);
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

namespace {

// Idempotent control calls wait for the connection (until the deadline)
// instead of failing fast: that is the retry of Unavailable.
std::unique_ptr<grpc::ClientContext> ControlContext(absl::Time deadline) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(deadline));
  context->set_wait_for_ready(true);
  return context;
}

std::string Range(const std::string& variable, int64_t offset, int64_t n) {
  return absl::StrCat("\"", variable, "\" [", offset, ", ", offset + n, ")");
}

}  // namespace

absl::StatusOr<ConfigureResponse> GrpcPsShard::Configure(
    const ConfigureRequest& request, absl::Time deadline) {
  ConfigureResponse response;
  auto context = ControlContext(deadline);
  grpc::Status status = control_->Configure(context.get(), request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "configure " + name_);
  return response;
}

absl::Status GrpcPsShard::CreateVariables(const CreateVariablesRequest& request,
                                          absl::Time deadline) {
  CreateVariablesResponse response;
  auto context = ControlContext(deadline);
  return FromGrpcStatus(
      control_->CreateVariables(context.get(), request, &response),
      "create variables on " + name_);
}

absl::StatusOr<StatsResponse> GrpcPsShard::Stats(absl::Time deadline) {
  StatsResponse response;
  auto context = ControlContext(deadline);
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
  auto context = ControlContext(deadline);
  return FromGrpcStatus(control_->Shutdown(context.get(), request, &response),
                        "shut down " + name_);
}

absl::StatusOr<HoldResponse> GrpcPsShard::Hold(const HoldRequest& request,
                                               absl::Time deadline) {
  HoldResponse response;
  auto context = ControlContext(deadline);
  grpc::Status status = control_->Hold(context.get(), request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "hold updates on " + name_);
  return response;
}

absl::StatusOr<SaveShardResponse> GrpcPsShard::SaveShard(
    const SaveShardRequest& request, absl::Time deadline) {
  SaveShardResponse response;
  auto context = ControlContext(deadline);
  grpc::Status status = control_->SaveShard(context.get(), request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "save on " + name_);
  return response;
}

absl::StatusOr<RestoreShardResponse> GrpcPsShard::RestoreShard(
    const RestoreShardRequest& request, absl::Time deadline) {
  RestoreShardResponse response;
  auto context = ControlContext(deadline);
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
  call->context = std::make_unique<grpc::ClientContext>();
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

// Whether every buffer holds exactly its part's elements. Calls that do not
// go over TCP, where they fail with the usual size errors.
template <typename Header, typename Span>
bool SizesMatch(const Header& header, const std::vector<Span>& pieces) {
  if (header.parts_size() != static_cast<int>(pieces.size())) return false;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (header.parts(static_cast<int>(i)).num_elements() !=
        static_cast<int64_t>(pieces[i].size())) {
      return false;
    }
  }
  return true;
}

template <typename Span>
int64_t TotalBytes(const std::vector<Span>& pieces) {
  int64_t bytes = 0;
  for (const Span& piece : pieces) {
    bytes += static_cast<int64_t>(piece.size() * sizeof(float));
  }
  return bytes;
}

}  // namespace

void GrpcPsShard::PullBatch(
    const PullBatchRequest& header, std::vector<absl::Span<float>> out,
    absl::Time deadline,
    std::function<void(absl::StatusOr<PullBatchResponse>)> done) {
  std::shared_ptr<SharedLease> lease =
      SizesMatch(header, out) ? LeaseSharedMemory(TotalBytes(out)) : nullptr;
  PullBatchVia(header, std::move(out), deadline, std::move(done),
               std::move(lease));
}

void GrpcPsShard::PullBatchVia(
    PullBatchRequest header, std::vector<absl::Span<float>> out,
    absl::Time deadline,
    std::function<void(absl::StatusOr<PullBatchResponse>)> done,
    std::shared_ptr<SharedLease> lease) {
  auto* call = new BulkCall;
  call->method = kBulkPullBatchMethod;
  call->what = header.parts().empty()
                   ? "pull of an empty batch from " + name_
                   : absl::StrCat("pull of ", BatchRange(header.parts()),
                                  " from ", name_);
  if (lease != nullptr) *header.mutable_shared() = lease->payload();
  call->lease = lease.get();
  call->request = EncodeBulkFrame(header, {}, nullptr);
  call->bytes = TotalBytes(out);
  call->bypass_budget = header.min_version() > 0;
  call->deadline = deadline;
  call->finish = [this, what = call->what, header = std::move(header),
                  out = std::move(out), deadline, done = std::move(done),
                  lease = std::move(lease)](const grpc::Status& status,
                                            const grpc::ByteBuffer& response,
                                            bool shared_memory_lost) mutable {
    if (lease != nullptr &&
        (shared_memory_lost ||
         (status.error_code() == grpc::StatusCode::UNAVAILABLE &&
          absl::Now() < deadline))) {
      // Resent over TCP (with TCP's retries): never into the same piece,
      // which a first attempt that reached the server may still fill.
      if (shared_memory_lost) OnSharedMemoryLost(lease->session);
      header.clear_shared();
      return PullBatchVia(std::move(header), std::move(out), deadline,
                          std::move(done), nullptr);
    }
    // The piece goes back before `done` runs, so a caller that waits for
    // it finds the region as it was.
    auto finish = [&lease, &done](auto result) {
      lease.reset();
      done(std::move(result));
    };
    if (!status.ok()) return finish(FromGrpcStatus(status, what));
    PullBatchResponse answer;
    absl::StatusOr<BulkFrame> frame = BulkFrame::Parse(response, answer);
    if (!frame.ok()) return finish(frame.status());
    if (answer.versions_size() != static_cast<int>(out.size())) {
      return finish(absl::InternalError(
          absl::StrCat(what, ": the server answered ", answer.versions_size(),
                       " parts for ", out.size())));
    }
    if (lease != nullptr) {
      if (frame->payload_bytes() != 0) {
        return finish(absl::InternalError(absl::StrCat(
            what,
            ": the server answered a shared-memory pull with a payload")));
      }
      const float* values = lease->values();
      for (absl::Span<float> piece : out) {
        std::copy(values, values + piece.size(), piece.data());
        values += piece.size();
      }
    } else if (absl::Status copied = frame->CopyPayload(out); !copied.ok()) {
      return finish(absl::Status(copied.code(),
                                 absl::StrCat(what, ": ", copied.message())));
    }
    finish(std::move(answer));
  };
  StartBulk(call);
}

void GrpcPsShard::PushBatch(
    const PushBatchRequest& header, std::vector<absl::Span<const float>> data,
    std::shared_ptr<const void> owner, absl::Time deadline,
    std::function<void(absl::StatusOr<PushBatchResponse>)> done) {
  std::shared_ptr<SharedLease> lease =
      SizesMatch(header, data) ? LeaseSharedMemory(TotalBytes(data)) : nullptr;
  PushBatchVia(header, std::move(data), std::move(owner), deadline,
               std::move(done), std::move(lease));
}

void GrpcPsShard::PushBatchVia(
    PushBatchRequest header, std::vector<absl::Span<const float>> data,
    std::shared_ptr<const void> owner, absl::Time deadline,
    std::function<void(absl::StatusOr<PushBatchResponse>)> done,
    std::shared_ptr<SharedLease> lease) {
  auto* call = new BulkCall;
  call->method = kBulkPushBatchMethod;
  call->what =
      header.parts().empty()
          ? "push of an empty batch to " + name_
          : absl::StrCat("push to ", BatchRange(header.parts()), " on ", name_);
  call->bytes = TotalBytes(data);
  if (lease != nullptr) {
    // One copy into the region; the caller's buffer is free from here on.
    float* values = lease->values();
    for (absl::Span<const float> piece : data) {
      std::copy(piece.begin(), piece.end(), values);
      values += piece.size();
    }
    owner.reset();
    *header.mutable_shared() = lease->payload();
    call->lease = lease.get();
    call->request = EncodeBulkFrame(header, {}, nullptr);
  } else {
    call->request = EncodeBulkFramePieces(header, data, std::move(owner));
  }
  call->deadline = deadline;
  // An async push that reached the server must not be applied twice.
  call->idempotent = false;
  call->finish = [this, what = call->what, header = std::move(header),
                  data = std::move(data), deadline, done = std::move(done),
                  lease = std::move(lease)](const grpc::Status& status,
                                            const grpc::ByteBuffer& response,
                                            bool shared_memory_lost) mutable {
    if (shared_memory_lost && lease != nullptr) {
      // Refused before anything was applied: resend the values, which are
      // still in the region, over TCP; the lease lives as long as the frame.
      OnSharedMemoryLost(lease->session);
      header.clear_shared();
      const float* values = lease->values();
      std::vector<absl::Span<const float>> copies;
      for (absl::Span<const float> piece : data) {
        copies.emplace_back(values, piece.size());
        values += piece.size();
      }
      return PushBatchVia(std::move(header), std::move(copies),
                          std::move(lease), deadline, std::move(done), nullptr);
    }
    const int parts = header.parts_size();
    // The piece goes back before `done` runs, so a caller that waits for
    // it finds the region as it was.
    auto finish = [&lease, &done](auto result) {
      lease.reset();
      done(std::move(result));
    };
    if (!status.ok()) return finish(FromGrpcStatus(status, what));
    PushBatchResponse answer;
    absl::StatusOr<BulkFrame> frame = BulkFrame::Parse(response, answer);
    if (!frame.ok()) return finish(frame.status());
    if (answer.results_size() != parts) {
      return finish(absl::InternalError(
          absl::StrCat(what, ": the server answered ", answer.results_size(),
                       " parts for ", parts)));
    }
    finish(std::move(answer));
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
