#include "client/grpc_ps_shard.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/grpc_tuning.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "proto/bulk_frame.h"
#include "proto/protocol.h"

namespace psflow {

struct GrpcPsShard::BulkCall {
  const char* method = nullptr;
  std::string what;  // "pull of \"w\" [0, 4096)" for errors
  grpc::ByteBuffer request;
  absl::Time deadline;
  bool idempotent = true;
  int64_t bytes = 0;  // tensor bytes, counted against the in-flight budget
  // Pulls that wait for a sync step bypass the budget: holding it while
  // waiting would queue the very pushes that complete the step.
  bool bypass_budget = false;
  int attempt = 0;
  // Per attempt.
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> reader;
  grpc::ByteBuffer response;
  grpc::Status status;
  // Called once with the final status and response.
  std::function<void(const grpc::Status&, const grpc::ByteBuffer&)> finish;
};

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
    connection->channel = grpc::CreateCustomChannel(
        address, grpc::InsecureChannelCredentials(), args);
    connection->stub = std::make_unique<grpc::GenericStub>(connection->channel);
    connections_.push_back(std::move(connection));
  }
  for (auto& connection : connections_) {
    connection->poller = std::thread([this, c = connection.get()] { Poll(c); });
  }
  control_ = ParameterServer::NewStub(connections_[0]->channel);
}

GrpcPsShard::~GrpcPsShard() {
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int* n) { return *n == 0; }, &in_flight_));
  }
  for (auto& connection : connections_) connection->queue.Shutdown();
  for (auto& connection : connections_) connection->poller.join();
}

void GrpcPsShard::Poll(Connection* connection) {
  void* tag = nullptr;
  bool ok = false;
  while (connection->queue.Next(&tag, &ok)) {
    auto* call = static_cast<BulkCall*>(tag);
    if (call->status.error_code() == grpc::StatusCode::UNAVAILABLE &&
        call->idempotent && call->attempt < options_.max_attempts &&
        absl::Now() < call->deadline) {
      Send(call);
      continue;
    }
    const int64_t bytes = call->bytes;
    call->finish(call->status, call->response);
    delete call;
    std::vector<BulkCall*> ready;
    {
      absl::MutexLock lock(&mu_);
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
    absl::MutexLock lock(&mu_);
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
  call->context->set_wait_for_ready(call->attempt > 1);
  call->response.Clear();
  call->status = grpc::Status();
  Connection& connection =
      *connections_[next_connection_.fetch_add(1) % connections_.size()];
  call->reader = connection.stub->PrepareUnaryCall(
      call->context.get(), call->method, call->request, &connection.queue);
  call->reader->StartCall();
  call->reader->Finish(&call->response, &call->status, call);
}

void GrpcPsShard::Pull(const PullRequest& header, absl::Span<float> out,
                       absl::Time deadline,
                       std::function<void(absl::StatusOr<PullResponse>)> done) {
  auto* call = new BulkCall;
  call->method = kBulkPullMethod;
  call->what = absl::StrCat(
      "pull of ",
      Range(header.variable(), header.offset_elements(), header.num_elements()),
      " from ", name_);
  call->request = EncodeBulkFrame(header, {}, nullptr);
  call->bytes = header.num_elements() * static_cast<int64_t>(sizeof(float));
  call->bypass_budget = header.min_version() > 0;
  call->deadline = deadline;
  call->finish = [what = call->what, out, done = std::move(done)](
                     const grpc::Status& status,
                     const grpc::ByteBuffer& response) {
    if (!status.ok()) return done(FromGrpcStatus(status, what));
    PullResponse header;
    absl::StatusOr<BulkFrame> frame = BulkFrame::Parse(response, header);
    if (!frame.ok()) return done(frame.status());
    absl::Status copied = frame->CopyPayload(out);
    if (!copied.ok()) {
      return done(absl::Status(copied.code(),
                               absl::StrCat(what, ": ", copied.message())));
    }
    done(header);
  };
  StartBulk(call);
}

void GrpcPsShard::Push(const PushRequest& header, absl::Span<const float> data,
                       std::shared_ptr<const void> owner, absl::Time deadline,
                       std::function<void(absl::StatusOr<PushResponse>)> done) {
  auto* call = new BulkCall;
  call->method = kBulkPushMethod;
  call->what = absl::StrCat(
      "push to ",
      Range(header.variable(), header.offset_elements(), header.num_elements()),
      " on ", name_);
  call->request = EncodeBulkFrame(header, data, std::move(owner));
  call->bytes = static_cast<int64_t>(data.size() * sizeof(float));
  call->deadline = deadline;
  // An async push that reached the server must not be applied twice.
  call->idempotent = false;
  call->finish = [what = call->what, done = std::move(done)](
                     const grpc::Status& status,
                     const grpc::ByteBuffer& response) {
    if (!status.ok()) return done(FromGrpcStatus(status, what));
    PushResponse header;
    absl::StatusOr<BulkFrame> frame = BulkFrame::Parse(response, header);
    if (!frame.ok()) return done(frame.status());
    done(header);
  };
  StartBulk(call);
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

}  // namespace

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
  call->request = EncodeBulkFrame(header, {}, nullptr);
  for (absl::Span<float> piece : out) {
    call->bytes += static_cast<int64_t>(piece.size() * sizeof(float));
  }
  call->bypass_budget = header.min_version() > 0;
  call->deadline = deadline;
  call->finish = [what = call->what, out = std::move(out),
                  done = std::move(done)](const grpc::Status& status,
                                          const grpc::ByteBuffer& response) {
    if (!status.ok()) return done(FromGrpcStatus(status, what));
    PullBatchResponse header;
    absl::StatusOr<BulkFrame> frame = BulkFrame::Parse(response, header);
    if (!frame.ok()) return done(frame.status());
    if (header.versions_size() != static_cast<int>(out.size())) {
      return done(absl::InternalError(
          absl::StrCat(what, ": the server answered ", header.versions_size(),
                       " parts for ", out.size())));
    }
    absl::Status copied = frame->CopyPayload(out);
    if (!copied.ok()) {
      return done(absl::Status(copied.code(),
                               absl::StrCat(what, ": ", copied.message())));
    }
    done(std::move(header));
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
  call->request = EncodeBulkFramePieces(header, data, std::move(owner));
  for (absl::Span<const float> piece : data) {
    call->bytes += static_cast<int64_t>(piece.size() * sizeof(float));
  }
  call->deadline = deadline;
  // An async push that reached the server must not be applied twice.
  call->idempotent = false;
  call->finish = [what = call->what, parts = header.parts_size(),
                  done = std::move(done)](const grpc::Status& status,
                                          const grpc::ByteBuffer& response) {
    if (!status.ok()) return done(FromGrpcStatus(status, what));
    PushBatchResponse header;
    absl::StatusOr<BulkFrame> frame = BulkFrame::Parse(response, header);
    if (!frame.ok()) return done(frame.status());
    if (header.results_size() != parts) {
      return done(absl::InternalError(
          absl::StrCat(what, ": the server answered ", header.results_size(),
                       " parts for ", parts)));
    }
    done(std::move(header));
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
                     const grpc::Status& status, const grpc::ByteBuffer&) {
    done(FromGrpcStatus(status, what));
  };
  StartBulk(call);
}

}  // namespace psflow
