// PsShard over gRPC: control calls on the typed stub, bulk tensor calls on
// generic byte-buffer calls spread over several TCP connections.
//
// Sends are zero-copy (the frame's payload slice points at the caller's
// buffer); a pull response is copied once, from gRPC's receive slices into
// the caller's buffer.
//
// Same host: the shard offers the server a shared-memory region at once
// (AttachSharedMemory, asynchronously). Once the server attached it, pulls
// and pushes carry their values through that region and only small headers
// through gRPC: no kernel TCP copies. Until then, when the server refuses
// (another host, --shared_memory=false), or when a call finds the region
// full, calls go over TCP as above. A server that forgot the session (it
// restarted) is re-attached, and the calls it refused are resent over TCP.
// Idempotent calls (everything but Push) that fail with Unavailable are
// retried, waiting for the connection to come back, until their deadline.
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
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "client/ps_shard.h"
#include "client/shared_memory_arena.h"
#include "common/mutex.h"
#include "common/rpc/transport_security.h"
#include "grpcpp/channel.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/generic/generic_stub.h"
#include "proto/ps.grpc.pb.h"

namespace psflow {

class GrpcPsShard final : public PsShard {
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
    // Shared memory offered to a server on this host; 0 keeps every call on
    // TCP. Pages are only touched as calls use them (first fit from the
    // start), so this is an upper bound, best about max_in_flight_bytes.
    int64_t shared_memory_bytes = int64_t{64} << 20;
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
  absl::StatusOr<HoldResponse> Hold(const HoldRequest& request,
                                    absl::Time deadline) override;
  absl::StatusOr<SaveShardResponse> SaveShard(const SaveShardRequest& request,
                                              absl::Time deadline) override;
  absl::StatusOr<RestoreShardResponse> RestoreShard(
      const RestoreShardRequest& request, absl::Time deadline) override;
  void PullBatch(
      const PullBatchRequest& header, std::vector<absl::Span<float>> out,
      absl::Time deadline,
      std::function<void(absl::StatusOr<PullBatchResponse>)> done) override;
  void PushBatch(
      const PushBatchRequest& header, std::vector<absl::Span<const float>> data,
      std::shared_ptr<const void> owner, absl::Time deadline,
      std::function<void(absl::StatusOr<PushBatchResponse>)> done) override;
  void Assign(const AssignRequest& header, absl::Span<const float> data,
              std::shared_ptr<const void> owner, absl::Time deadline,
              std::function<void(absl::Status)> done) override;

  // Waits until the shared-memory offer is settled, at most `timeout`;
  // returns whether calls now go through shared memory.
  bool WaitForSharedMemory(absl::Duration timeout);
  // Bytes of the shared region held by calls in flight, plus those retired
  // after a call ended while the server might still use them (0 without
  // shared memory).
  int64_t shared_memory_bytes_held() const;

 private:
  struct BulkCall;
  struct SharedLease;
  enum class SharedState { kOff, kAttaching, kAttached };
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

  // Offers the region to the server; the answer arrives on a gRPC thread.
  void StartAttach() ABSL_EXCLUSIVE_LOCKS_REQUIRED(shared_mu_);
  // `bytes` of the region for one call, or null: the call goes over TCP.
  std::shared_ptr<SharedLease> LeaseSharedMemory(int64_t bytes);
  // The server forgot `session`: attach again.
  void OnSharedMemoryLost(uint64_t session);
  // A call gave up on its piece of `lease`'s region; once half the region
  // is given up, a fresh region replaces it.
  void RetirePiece(SharedLease& lease, const BulkCall& call);

  // The batch calls, with their values in `lease` (or, when null, in the
  // frame). Single pulls and pushes through shared memory use these too.
  void PullBatchVia(PullBatchRequest header, std::vector<absl::Span<float>> out,
                    absl::Time deadline,
                    std::function<void(absl::StatusOr<PullBatchResponse>)> done,
                    std::shared_ptr<SharedLease> lease);
  void PushBatchVia(PushBatchRequest header,
                    std::vector<absl::Span<const float>> data,
                    std::shared_ptr<const void> owner, absl::Time deadline,
                    std::function<void(absl::StatusOr<PushBatchResponse>)> done,
                    std::shared_ptr<SharedLease> lease);

  const std::string name_;
  const Options options_;
  std::vector<std::unique_ptr<Connection>> connections_;
  std::unique_ptr<ParameterServer::Stub> control_;
  std::atomic<uint64_t> next_connection_{0};

  Mutex mu_;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;            // started or queued
  int64_t in_flight_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // started only
  std::deque<BulkCall*> queued_ ABSL_GUARDED_BY(mu_);

  // Shared memory (null arena: disabled or unavailable). Lock order:
  // shared_mu_ before mu_.
  mutable Mutex shared_mu_;
  // Replaced (RenewSharedMemory) once half of it is retired.
  std::shared_ptr<SharedMemoryArena> arena_ ABSL_GUARDED_BY(shared_mu_);
  SharedState shared_state_ ABSL_GUARDED_BY(shared_mu_) = SharedState::kOff;
  uint64_t session_ ABSL_GUARDED_BY(shared_mu_) = 0;
  bool closing_ ABSL_GUARDED_BY(shared_mu_) = false;
  // The attach in flight, for cancelling it in the destructor.
  BulkCall* attach_call_ ABSL_GUARDED_BY(shared_mu_) = nullptr;
};

}  // namespace psflow

#endif  // PSFLOW_CLIENT_GRPC_PS_SHARD_H_
