// PsShard over gRPC: control calls on the typed stub, bulk tensor calls on
// generic byte-buffer calls spread over several TCP connections.
//
// Sends are zero-copy (the frame's payload slice points at the caller's
// buffer); a pull response is copied once, from gRPC's receive slices into
// the caller's buffer. Idempotent calls (everything but pushes and
// shared-memory calls) that fail with Unavailable are retried, waiting for
// the connection to come back, until their deadline.
//
// It is also a SharedMemoryTransport: it carries batches whose values lie
// in a shared-memory region and offers regions to the server, for the
// SharedMemoryShard decorator (shared_memory_shard.h), which owns the
// region.
//
// Bulk calls use the completion-queue API with one queue and one poller
// thread per connection; `done` callbacks run on those threads. The
// destructor waits for in-flight calls, shuts the queues down and joins the
// pollers before any channel is destroyed: gRPC's callback API races when a
// channel dies right after its last callback (grpc/grpc#40213), this order
// cannot.
//
// Thread-safe.
#ifndef PSFLOW_CLIENT_GRPC_PS_SHARD_H_
#define PSFLOW_CLIENT_GRPC_PS_SHARD_H_

#include <atomic>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "client/ps_shard.h"
#include "client/shared_memory_transport.h"
#include "common/mutex.h"
#include "common/rpc/transport_security.h"
#include "grpcpp/channel.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/generic/generic_stub.h"
#include "proto/ps.grpc.pb.h"

namespace psflow {

class GrpcPsShard final : public SharedMemoryTransport {
 public:
  struct Options {
    // TCP connections for bulk calls; chunks are spread round-robin.
    int connections = 2;
    // Attempts for an idempotent call that fails with Unavailable.
    int max_attempts = 5;
    // Tensor bytes in flight to this server at once; more calls wait in
    // the client. Bounds the server's buffer memory when many workers push
    // large models, and keeps its reused buffers warm.
    int64_t max_in_flight_bytes = int64_t{64} << 20;
    // The job's transport security (common/rpc/transport_security.h).
    TransportSecurity security;
  };

  // Connects lazily to `address` (host:port). `name` is used in errors,
  // e.g. "ps-1 at 10.0.0.3:2222".
  GrpcPsShard(const std::string& address, std::string name,
              const Options& options);
  ~GrpcPsShard() override;

  const std::string& name() const override { return name_; }
  absl::StatusOr<ConfigureResponse> Configure(const ConfigureRequest& request,
                                              absl::Time deadline) override;
  absl::Status CreateVariables(const CreateVariablesRequest& request,
                               absl::Time deadline) override;
  absl::StatusOr<StatsResponse> Stats(absl::Time deadline) override;
  absl::Status Shutdown(const std::string& reason,
                        absl::Time deadline) override;
  absl::Status ExcludeWorkers(const ExcludeWorkersRequest& request,
                              absl::Time deadline) override;
  absl::StatusOr<HoldResponse> Hold(const HoldRequest& request,
                                    absl::Time deadline) override;
  absl::StatusOr<SaveShardResponse> SaveShard(const SaveShardRequest& request,
                                              absl::Time deadline) override;
  absl::StatusOr<RestoreShardResponse> RestoreShard(
      const RestoreShardRequest& request, absl::Time deadline) override;
  void PullRows(
      const PullRowsRequest& header, std::vector<absl::Span<const int64_t>> ids,
      std::vector<absl::Span<float>> out, absl::Time deadline,
      std::function<void(absl::StatusOr<PullRowsResponse>)> done) override;
  void PushRows(
      const PushRowsRequest& header, std::vector<absl::Span<const int64_t>> ids,
      std::vector<absl::Span<const float>> gradients,
      std::shared_ptr<const void> owner, absl::Time deadline,
      std::function<void(absl::StatusOr<PushRowsResponse>)> done) override;
  void PullBatch(
      const PullBatchRequest& header, std::vector<absl::Span<float>> out,
      absl::Time deadline,
      std::function<void(absl::StatusOr<PullBatchResponse>)> done) override;
  void PushBatch(
      const PushBatchRequest& header, std::vector<absl::Span<const float>> data,
      std::shared_ptr<const void> owner, absl::Time deadline,
      std::function<void(absl::StatusOr<PushBatchResponse>)> done) override;
  // One call: the server applies the push, then answers the pull.
  void PushThenPull(
      const PushBatchRequest& header, std::vector<absl::Span<const float>> data,
      std::shared_ptr<const void> owner, std::vector<absl::Span<float>> out,
      absl::Time deadline,
      std::function<void(absl::StatusOr<PushBatchResponse>)> done) override;
  void Assign(const AssignRequest& header, absl::Span<const float> data,
              std::shared_ptr<const void> owner, absl::Time deadline,
              std::function<void(absl::Status)> done) override;

  void OfferSharedMemory(
      const AttachSharedMemoryRequest& request,
      std::function<void(absl::StatusOr<AttachSharedMemoryResponse>)> done)
      override;
  void CancelSharedMemoryOffers() override;
  void CancelInFlight() override;
  void Close() override;
  void DetachSharedMemory(uint64_t session, absl::Time deadline) override;

 private:
  struct BulkCall;
  // A blocking control call's context, registered while it runs.
  class ControlCall {
   public:
    ControlCall(GrpcPsShard* shard, absl::Time deadline);
    ~ControlCall();
    ControlCall(const ControlCall&) = delete;
    ControlCall& operator=(const ControlCall&) = delete;
    grpc::ClientContext* get() { return &context_; }

   private:
    GrpcPsShard* const shard_;
    grpc::ClientContext context_;
  };
  struct Connection {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<grpc::GenericStub> stub;
    grpc::CompletionQueue queue;
    std::thread poller;
  };

  // Starts `call` now, or queues it while the in-flight budget is spent.
  void StartBulk(BulkCall* call);
  // Sends (or, for a retry, resends) `call` on the next connection.
  void Send(BulkCall* call);
  // Handles completions of one connection's queue until it shuts down.
  void Poll(Connection* connection);

  const std::string name_;
  const std::string address_;
  const Options options_;
  std::vector<std::unique_ptr<Connection>> connections_;
  std::unique_ptr<ParameterServer::Stub> control_;
  std::atomic<uint64_t> next_connection_{0};

  Mutex mu_;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;            // started or queued
  int64_t in_flight_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // started only
  std::deque<BulkCall*> queued_ ABSL_GUARDED_BY(mu_);
  // Calls sent and not finished (their contexts, for CancelInFlight).
  std::set<BulkCall*> started_ ABSL_GUARDED_BY(mu_);
  // Control calls running now (ControlCall), for CancelInFlight.
  std::set<grpc::ClientContext*> control_calls_ ABSL_GUARDED_BY(mu_);
  // Close() was called: every call is cancelled as it starts.
  bool closed_ ABSL_GUARDED_BY(mu_) = false;

  // Shared-memory offers in flight, for cancelling them. Lock order:
  // offers_mu_ before mu_.
  Mutex offers_mu_;
  std::set<BulkCall*> offers_ ABSL_GUARDED_BY(offers_mu_);
};

}  // namespace psflow

#endif  // PSFLOW_CLIENT_GRPC_PS_SHARD_H_
