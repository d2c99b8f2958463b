#include "ps/grpc_ps_server.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/grpc_tuning.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "proto/bulk_frame.h"
#include "proto/protocol.h"
#include "proto/ps.grpc.pb.h"
#include "ps/shard_checkpoint.h"
#include "ps/shared_memory_sessions.h"

namespace psflow {

// ---- Control RPCs ----------------------------------------------------------

class GrpcParameterServer::ControlService final
    : public ParameterServer::CallbackService {
 public:
  explicit ControlService(GrpcParameterServer* server) : server_(server) {}

  grpc::ServerUnaryReactor* Configure(grpc::CallbackServerContext* context,
                                      const ConfigureRequest* request,
                                      ConfigureResponse* response) override {
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
                        : "")
                << ", chunks of " << result->chunk_elements() << " floats";
    }
    return Done(context, result.status());
  }

  grpc::ServerUnaryReactor* CreateVariables(
      grpc::CallbackServerContext* context,
      const CreateVariablesRequest* request,
      CreateVariablesResponse* response) override {
    absl::Status status = server_->core().CreateVariables(*request);
    if (status.ok()) {
      StatsResponse stats = server_->core().Stats();
      LOG(INFO) << "holding " << stats.num_variables() << " variables, "
                << stats.total_elements() << " elements";
    }
    return Done(context, status);
  }

  grpc::ServerUnaryReactor* Stats(grpc::CallbackServerContext* context,
                                  const StatsRequest* request,
                                  StatsResponse* response) override {
    *response = server_->Stats();
    return Done(context, absl::OkStatus());
  }

  grpc::ServerUnaryReactor* AttachSharedMemory(
      grpc::CallbackServerContext* context,
      const AttachSharedMemoryRequest* request,
      AttachSharedMemoryResponse* response) override {
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
    server_->shared_memory_->Detach(request->session());
    return Done(context, absl::OkStatus());
  }

  grpc::ServerUnaryReactor* Hold(grpc::CallbackServerContext* context,
                                 const HoldRequest* request,
                                 HoldResponse* response) override {
    absl::StatusOr<HoldResponse> result = server_->core().Hold(*request);
    if (result.ok()) *response = *result;
    return Done(context, result.status());
  }

  grpc::ServerUnaryReactor* SaveShard(grpc::CallbackServerContext* context,
                                      const SaveShardRequest* request,
                                      SaveShardResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    const absl::Time deadline = absl::FromChrono(context->deadline());
    GrpcParameterServer* server = server_;
    server_->RunInBackground([server, reactor, request, response, deadline] {
      const absl::Time start = absl::Now();
      absl::StatusOr<SaveShardResponse> result =
          psflow::SaveShard(server->core(), *request, deadline,
                            [server] { return server->shutdown_requested(); });
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
      reactor->Finish(ToGrpcStatus(result.status()));
    });
    return reactor;
  }

  grpc::ServerUnaryReactor* RestoreShard(
      grpc::CallbackServerContext* context, const RestoreShardRequest* request,
      RestoreShardResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    GrpcParameterServer* server = server_;
    server_->RunInBackground([server, reactor, request, response] {
      const absl::Time start = absl::Now();
      absl::StatusOr<RestoreShardResponse> result =
          psflow::RestoreShard(server->core(), *request);
      if (result.ok()) {
        *response = *std::move(result);
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
      reactor->Finish(ToGrpcStatus(result.status()));
    });
    return reactor;
  }

  grpc::ServerUnaryReactor* Shutdown(grpc::CallbackServerContext* context,
                                     const ShutdownRequest* request,
                                     ShutdownResponse* response) override {
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

// Serves one bulk RPC: reads the request frame, answers with one frame.
// Deletes itself when gRPC is done with it (OnDone).
class BulkReactor final : public grpc::ServerGenericBidiReactor {
 public:
  BulkReactor(grpc::GenericCallbackServerContext* context,
              ParameterServerCore* core, BufferPool* pool,
              SharedMemorySessions* shared_memory)
      : context_(context),
        core_(core),
        pool_(pool),
        shared_memory_(shared_memory) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Reply(absl::InvalidArgumentError("the bulk request carried no message"));
      return;
    }
    request_bytes_ = request_.Length();
    const std::string& method = context_->method();
    if (method == kBulkPullMethod) {
      HandlePull();  // Replies now or when the awaited step is applied.
    } else if (method == kBulkPullBatchMethod) {
      HandlePullBatch();  // Likewise.
    } else if (method == kBulkPushMethod) {
      Reply(HandlePush());
    } else if (method == kBulkPushBatchMethod) {
      Reply(HandlePushBatch());
    } else if (method == kBulkAssignMethod) {
      Reply(HandleAssign());
    } else {
      Reply(absl::UnimplementedError(
          absl::StrCat("unknown method ", method,
                       "; is the client from another psflow release?")));
    }
  }

  void OnCancel() override {
    bool answer = false;
    std::string waiting_for;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      const bool was_waiting = !waits_.empty();
      for (auto it = waits_.begin(); it != waits_.end();) {
        const ChunkRef& ref = refs_[it->first];
        if (waiting_for.empty()) {
          waiting_for =
              absl::StrCat("\"", ref.variable->name(), "\" chunk ", ref.chunk,
                           " (at step ", ref.variable->Version(ref.chunk), ")");
        }
        // A wait that cannot be cancelled is firing now; its callback
        // removes itself and, if last, answers.
        it = ref.variable->CancelWait(ref.chunk, it->second) ? waits_.erase(it)
                                                             : std::next(it);
      }
      if (was_waiting && waits_.empty() && !answer_claimed_) {
        answer_claimed_ = true;
        answer = true;
      }
    }
    if (answer) {
      Reply(absl::DeadlineExceededError(
          absl::StrCat("pull was cancelled while waiting for step ",
                       min_version_, " of ", waiting_for)));
    }
  }

  void OnDone() override { delete this; }

 private:
  void HandlePull() {
    PullRequest header;
    absl::StatusOr<BulkFrame> frame = BulkFrame::Parse(request_, header);
    if (!frame.ok()) return Reply(frame.status());
    absl::StatusOr<ChunkRef> ref =
        core_->Resolve(header.protocol_version(), header.variable(),
                       header.offset_elements(), header.num_elements());
    if (!ref.ok()) return Reply(ref.status());
    refs_.push_back(*ref);
    min_version_ = header.min_version();
    consistent_snapshot_ = header.consistent_snapshot();
    AwaitThenSendPull();
  }

  void HandlePullBatch() {
    PullBatchRequest header;
    absl::StatusOr<BulkFrame> frame = BulkFrame::Parse(request_, header);
    if (!frame.ok()) return Reply(frame.status());
    if (absl::Status parts =
            ParameterServerCore::CheckBatchSize(header.parts_size());
        !parts.ok()) {
      return Reply(parts);
    }
    for (const PullRequest& part : header.parts()) {
      absl::StatusOr<ChunkRef> ref =
          core_->Resolve(header.protocol_version(), part.variable(),
                         part.offset_elements(), part.num_elements());
      if (!ref.ok()) return Reply(ref.status());
      refs_.push_back(*ref);
    }
    batch_ = true;
    min_version_ = header.min_version();
    consistent_snapshot_ = header.consistent_snapshot();
    if (header.has_shared()) {
      absl::StatusOr<SharedMemorySessions::Payload> shared =
          ResolveShared(header.shared(), *frame, refs_);
      if (!shared.ok()) return Reply(shared.status());
      shared_ = *std::move(shared);
    }
    AwaitThenSendPull();
  }

  // The shared-memory range of a batch whose values bypass the frame.
  absl::StatusOr<SharedMemorySessions::Payload> ResolveShared(
      const SharedPayload& shared, const BulkFrame& frame,
      absl::Span<const ChunkRef> refs) {
    if (frame.payload_bytes() != 0) {
      return absl::InvalidArgumentError(
          "a batch with shared-memory values also carries a payload");
    }
    int64_t total = 0;
    for (const ChunkRef& ref : refs) total += ref.num_elements;
    return shared_memory_->Resolve(shared,
                                   total * static_cast<int64_t>(sizeof(float)));
  }

  // Answers now when every part is at min_version_; otherwise waits on
  // each part that is not, and the last to get there answers (or OnCancel
  // does, at the client's deadline). `this` may be gone on return.
  void AwaitThenSendPull() {
    {
      absl::MutexLock lock(&mu_);
      // Cancelled before we could wait: answer without registering.
      for (size_t i = 0; i < refs_.size() && !cancelled_; ++i) {
        // The callback blocks on mu_ until this loop is done.
        std::optional<uint64_t> id = refs_[i].variable->WhenVersionReached(
            refs_[i].chunk, min_version_, [this, i] { OnVersionReached(i); });
        if (id.has_value()) waits_.emplace_back(i, *id);
      }
      if (!waits_.empty()) return;
      answer_claimed_ = true;
    }
    SendPull();
  }

  // Runs on the thread whose push completed the awaited step for part i.
  void OnVersionReached(size_t part) {
    {
      absl::MutexLock lock(&mu_);
      auto it = std::find_if(waits_.begin(), waits_.end(),
                             [part](const auto& w) { return w.first == part; });
      if (it != waits_.end()) waits_.erase(it);
      if (!waits_.empty() || answer_claimed_) return;
      answer_claimed_ = true;
    }
    SendPull();
  }

  void SendPull() {
    if (shared_.region != nullptr) return SendSharedPull();
    std::vector<absl::Span<const float>> pieces;
    std::vector<int64_t> versions;
    std::shared_ptr<PooledBuffer> snapshot;
    if (consistent_snapshot_) {
      int64_t total = 0;
      for (const ChunkRef& ref : refs_) total += ref.num_elements;
      snapshot = pool_->Acquire(total);
      int64_t offset = 0;
      for (const ChunkRef& ref : refs_) {
        absl::Span<float> out =
            snapshot->span().subspan(offset, ref.num_elements);
        versions.push_back(core_->Pull(ref, out).version());
        pieces.push_back(out);
        offset += ref.num_elements;
      }
    } else {
      // Zero-copy: the frame points into the variables, which live as long
      // as the core, and the core outlives the drained server.
      for (const ChunkRef& ref : refs_) {
        PullView view = core_->View(ref);
        versions.push_back(view.response.version());
        pieces.push_back(view.values);
      }
    }
    if (batch_) {
      PullBatchResponse response;
      for (int64_t v : versions) response.add_versions(v);
      response_ = EncodeBulkFramePieces(response, pieces, std::move(snapshot));
    } else {
      PullResponse response;
      response.set_version(versions[0]);
      response_ = EncodeBulkFramePieces(response, pieces, std::move(snapshot));
    }
    Reply(absl::OkStatus());
  }

  // Copies every part, each under its chunk's lock, into the client's
  // shared memory; the answer is a header alone.
  void SendSharedPull() {
    PullBatchResponse response;
    int64_t offset = 0;
    for (const ChunkRef& ref : refs_) {
      response.add_versions(
          core_->Pull(ref, shared_.values.subspan(offset, ref.num_elements))
              .version());
      offset += ref.num_elements;
    }
    shared_ = {};  // Unmaps once its client detached.
    response_ = EncodeBulkFrame(response, {}, nullptr);
    Reply(absl::OkStatus());
  }

  // A request frame with a payload, resolved and copied (the one receive
  // copy) into a reused buffer.
  struct ChunkPayload {
    ChunkRef ref;
    std::shared_ptr<PooledBuffer> values;
  };

  template <typename Header>
  absl::StatusOr<ChunkPayload> ReadChunkPayload(Header& header,
                                                absl::string_view what) {
    absl::StatusOr<BulkFrame> frame = BulkFrame::Parse(request_, header);
    if (!frame.ok()) return frame.status();
    absl::StatusOr<ChunkRef> ref =
        core_->Resolve(header.protocol_version(), header.variable(),
                       header.offset_elements(), header.num_elements());
    if (!ref.ok()) return ref.status();
    ChunkPayload payload{*ref, pool_->Acquire(ref->num_elements)};
    absl::Status copied = frame->CopyPayload(payload.values->span());
    if (!copied.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " \"", header.variable(), "\": ", copied.message()));
    }
    request_.Clear();  // Release gRPC's receive slices early.
    return payload;
  }

  absl::Status HandlePush() {
    PushRequest header;
    absl::StatusOr<ChunkPayload> payload = ReadChunkPayload(header, "push to");
    if (!payload.ok()) return payload.status();
    absl::StatusOr<PushResponse> response =
        core_->Push(payload->ref, header, payload->values->span());
    if (!response.ok()) return response.status();
    response_ = EncodeBulkFrame(*response, {}, nullptr);
    return absl::OkStatus();
  }

  absl::Status HandlePushBatch() {
    PushBatchRequest header;
    absl::StatusOr<BulkFrame> frame = BulkFrame::Parse(request_, header);
    if (!frame.ok()) return frame.status();
    RETURN_IF_ERROR(ParameterServerCore::CheckBatchSize(header.parts_size()));
    std::vector<ChunkRef> refs;
    int64_t total = 0;
    for (const PushRequest& part : header.parts()) {
      ASSIGN_OR_RETURN(
          ChunkRef ref,
          core_->Resolve(header.protocol_version(), part.variable(),
                         part.offset_elements(), part.num_elements()));
      refs.push_back(ref);
      total += ref.num_elements;
    }
    std::shared_ptr<PooledBuffer> values = pool_->Acquire(total);
    std::vector<absl::Span<float>> pieces;
    std::vector<absl::Span<const float>> gradients;
    int64_t offset = 0;
    for (const ChunkRef& ref : refs) {
      pieces.push_back(values->span().subspan(offset, ref.num_elements));
      gradients.push_back(pieces.back());
      offset += ref.num_elements;
    }
    if (header.has_shared()) {
      // One copy out of the client's memory, which the client could still
      // change: the NaN/Inf check and the update must see the same values.
      ASSIGN_OR_RETURN(SharedMemorySessions::Payload shared,
                       ResolveShared(header.shared(), *frame, refs));
      std::memcpy(values->span().data(), shared.values.data(),
                  shared.values.size() * sizeof(float));
    } else if (absl::Status copied = frame->CopyPayload(pieces); !copied.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("push batch of ", refs.size(), " parts starting with \"",
                       header.parts(0).variable(), "\": ", copied.message()));
    }
    request_.Clear();  // Release gRPC's receive slices early.
    ASSIGN_OR_RETURN(PushBatchResponse response,
                     core_->PushBatch(refs, header.version(),
                                      header.worker_index(), gradients));
    response_ = EncodeBulkFrame(response, {}, nullptr);
    return absl::OkStatus();
  }

  absl::Status HandleAssign() {
    AssignRequest header;
    absl::StatusOr<ChunkPayload> payload =
        ReadChunkPayload(header, "assign to");
    if (!payload.ok()) return payload.status();
    absl::Status assigned =
        core_->Assign(payload->ref, payload->values->span());
    if (!assigned.ok()) return assigned;
    response_ = EncodeBulkFrame(AssignResponse(), {}, nullptr);
    return absl::OkStatus();
  }

  // Answers exactly once; must be the caller's last use of `this`.
  void Reply(const absl::Status& status) {
    if (replied_.exchange(true)) return;
    if (status.ok()) {
      core_->CountBytes(request_bytes_, response_.Length());
      StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
    } else {
      core_->CountBytes(request_bytes_, 0);
      if (SharedMemorySessions::IsLostSession(status)) {
        context_->AddTrailingMetadata(kSharedMemoryLostKey,
                                      kSharedMemoryLostValue);
      }
      Finish(ToGrpcStatus(status));
    }
  }

  grpc::GenericCallbackServerContext* const context_;
  ParameterServerCore* const core_;
  BufferPool* const pool_;
  SharedMemorySessions* const shared_memory_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  int64_t request_bytes_ = 0;
  std::atomic<bool> replied_{false};
  // Pull state, set before any wait is registered.
  std::vector<ChunkRef> refs_;
  bool batch_ = false;
  int64_t min_version_ = 0;
  bool consistent_snapshot_ = false;
  SharedMemorySessions::Payload shared_;  // set for a shared-memory pull
  absl::Mutex mu_;
  // Pending waits: (index into refs_, WhenVersionReached id).
  std::vector<std::pair<size_t, uint64_t>> waits_ ABSL_GUARDED_BY(mu_);
  // Set by whichever of the last wait, OnCancel or an immediate answer
  // replies to a pull, so that exactly one does.
  bool answer_claimed_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

class GrpcParameterServer::BulkService final
    : public grpc::CallbackGenericService {
 public:
  BulkService(ParameterServerCore* core, BufferPool* pool,
              SharedMemorySessions* shared_memory)
      : core_(core), pool_(pool), shared_memory_(shared_memory) {}

  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    return new BulkReactor(context, core_, pool_, shared_memory_);
  }

 private:
  ParameterServerCore* const core_;
  BufferPool* const pool_;
  SharedMemorySessions* const shared_memory_;
};

// ---- Lifecycle -------------------------------------------------------------

absl::StatusOr<std::unique_ptr<GrpcParameterServer>> GrpcParameterServer::Start(
    const Options& options) {
  std::unique_ptr<GrpcParameterServer> server(new GrpcParameterServer);
  server->grace_ = options.grace;
  server->core_ = std::make_unique<ParameterServerCore>(options.core);
  // Idle chunk buffers kept for reuse: enough for many in-flight chunks.
  server->pool_ = BufferPool::Create(size_t{256} << 20);
  server->shared_memory_ =
      std::make_unique<SharedMemorySessions>(options.shared_memory);
  server->control_ = std::make_unique<ControlService>(server.get());
  server->bulk_ = std::make_unique<BulkService>(
      server->core_.get(), server->pool_.get(), server->shared_memory_.get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen_address,
                           grpc::InsecureServerCredentials(), &server->port_);
  // gRPC enables SO_REUSEPORT by default: a second server on a busy port
  // would silently share it and split the clients. Fail instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(kMaxBulkMessageBytes);
  builder.SetMaxSendMessageSize(kMaxBulkMessageBytes);
  for (const auto& [name, value] : BulkTransportChannelArgs()) {
    builder.AddChannelArgument(name, value);
  }
  builder.RegisterService(server->control_.get());
  builder.RegisterCallbackGenericService(server->bulk_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", options.listen_address,
        ": the port is in use or the address is not local; free the port or "
        "fix the task's address in TF_CONFIG"));
  }
  return server;
}

StatsResponse GrpcParameterServer::Stats() const {
  StatsResponse stats = core_->Stats();
  stats.set_shared_memory_sessions(shared_memory_->size());
  stats.set_shared_memory_bytes(shared_memory_->bytes());
  return stats;
}

void GrpcParameterServer::RequestShutdown(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (shutdown_requested_.HasBeenNotified()) return;
  reason_ = reason;
  shutdown_requested_.Notify();
}

void GrpcParameterServer::RunInBackground(std::function<void()> work) {
  absl::MutexLock lock(&background_mu_);
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
      absl::MutexLock lock(&background_mu_);
      threads.swap(background_);
    }
    for (BackgroundThread& t : threads) t.thread.join();
  };
  join_background();
  absl::MutexLock lock(&mu_);
  if (!drained_) {
    if (auto* health = server_->GetHealthCheckService()) {
      health->SetServingStatus(false);
    }
    // Shutdown() must not run under a handler; Wait() is the owner's thread.
    server_->Shutdown(absl::ToChronoTime(absl::Now() + grace_));
    server_->Wait();
    join_background();
    drained_ = true;
  }
  return reason_;
}

GrpcParameterServer::~GrpcParameterServer() {
  if (server_ == nullptr) return;
  RequestShutdown("server destroyed");
  Wait();
}

}  // namespace psflow
