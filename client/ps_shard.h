// A connection to one parameter server: the transport-free interface that
// the sharded client (ps_client.h) drives. Two implementations: gRPC
// (grpc_ps_shard.h) and an in-process twin over ParameterServerCore
// (local_ps_shard.h) for tests; one conformance suite runs against both.
//
// Control calls block until done or `deadline`. Bulk calls are
// asynchronous: they return at once and run `done` exactly once, on an
// arbitrary thread, when the call completes. Buffers passed to a bulk call
// must stay valid until `done` runs; a push's `owner` is held for as long
// as the transport may read its data.
//
// Thread-safe.
#ifndef PSFLOW_CLIENT_PS_SHARD_H_
#define PSFLOW_CLIENT_PS_SHARD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "proto/ps.pb.h"

namespace psflow {

// Memory for a caller's long-lived tensors (a worker's parameters and
// gradients) that a shard's bulk calls read and write in place: a piece of
// the region a same-host server maps (shared_memory_shard.h), so a pull or
// push whose buffers lie in it carries no copy of the values on the client.
// Freed when the last reference goes.
class SharedBuffer {
 public:
  virtual ~SharedBuffer() = default;
  virtual absl::Span<float> span() = 0;
  // A call on this memory ended while the server may still read or write
  // it (a deadline, a cancel, a broken connection), or calls no longer
  // carry it in place (its region was replaced). The owner must stop using
  // it once the calls it started have ended, and take fresh memory.
  virtual bool retired() const = 0;
};

class PsShard {
 public:
  virtual ~PsShard() = default;

  // "ps-1 at 10.0.0.3:2222": used in every error message.
  virtual const std::string& name() const = 0;

  virtual absl::StatusOr<ConfigureResponse> Configure(
      const ConfigureRequest& request, absl::Time deadline) = 0;
  virtual absl::Status CreateVariables(const CreateVariablesRequest& request,
                                       absl::Time deadline) = 0;
  virtual absl::StatusOr<StatsResponse> Stats(absl::Time deadline) = 0;
  virtual absl::Status Shutdown(const std::string& reason,
                                absl::Time deadline) = 0;

  // BOUNDED mode: the workers that no longer bound the others.
  virtual absl::Status ExcludeWorkers(const ExcludeWorkersRequest& request,
                                      absl::Time deadline) = 0;

  // Checkpoint RPCs (proto/ps.proto).
  virtual absl::StatusOr<HoldResponse> Hold(const HoldRequest& request,
                                            absl::Time deadline) = 0;
  virtual absl::StatusOr<SaveShardResponse> SaveShard(
      const SaveShardRequest& request, absl::Time deadline) = 0;
  virtual absl::StatusOr<RestoreShardResponse> RestoreShard(
      const RestoreShardRequest& request, absl::Time deadline) = 0;

  // Pulls and pushes carry one or more parts of this server's variables
  // (whole chunks, or several pieces smaller than a chunk; see
  // PullBatchRequest/PushBatchRequest in proto/ps.proto). `out[i]` and
  // `data[i]` belong to header.parts(i); gradients and values are sent
  // without copying (`owner` keeps them alive until sent). A pull answers
  // once every part reached header.min_version() (sync mode).
  virtual void PullBatch(
      const PullBatchRequest& header, std::vector<absl::Span<float>> out,
      absl::Time deadline,
      std::function<void(absl::StatusOr<PullBatchResponse>)> done) = 0;
  virtual void PushBatch(
      const PushBatchRequest& header, std::vector<absl::Span<const float>> data,
      std::shared_ptr<const void> owner, absl::Time deadline,
      std::function<void(absl::StatusOr<PushBatchResponse>)> done) = 0;

  // A push whose answer carries the values of header.then_pull(), read
  // once the push was applied: one call where a push and then a pull took
  // two. `data` is the push's as in PushBatch; `out[i]` receives
  // header.then_pull().parts(i). `done` gets the push's answer with
  // `pulled` set. An error may come after the push was applied (only the
  // pull failed), as a push's deadline may. This default sends the push,
  // then the pull once the push is answered (the same result in two
  // calls); a transport that carries both in one call overrides it.
  virtual void PushThenPull(
      const PushBatchRequest& header, std::vector<absl::Span<const float>> data,
      std::shared_ptr<const void> owner, std::vector<absl::Span<float>> out,
      absl::Time deadline,
      std::function<void(absl::StatusOr<PushBatchResponse>)> done);

  // Embedding-table rows (proto/ps.proto PullRowsRequest): `ids[i]` are
  // header.parts(i)'s ids, and `out[i]` receives their rows (ids x dim).
  // A push sends ids[i] and gradients[i] per part; `owner` keeps them alive
  // until sent. Every id appears once per part (the client deduplicates).
  virtual void PullRows(
      const PullRowsRequest& header, std::vector<absl::Span<const int64_t>> ids,
      std::vector<absl::Span<float>> out, absl::Time deadline,
      std::function<void(absl::StatusOr<PullRowsResponse>)> done) = 0;
  virtual void PushRows(
      const PushRowsRequest& header, std::vector<absl::Span<const int64_t>> ids,
      std::vector<absl::Span<const float>> gradients,
      std::shared_ptr<const void> owner, absl::Time deadline,
      std::function<void(absl::StatusOr<PushRowsResponse>)> done) = 0;

  // Cancels every call started and not finished yet: bulk calls (their
  // `done` gets Cancelled soon after) and blocking control calls (they
  // return Cancelled). For a task that learned the job ended while a call
  // waits for a step that will never come or for a server that is gone.
  // Calls queued behind them, and those started later, go on. A transport
  // whose calls never wait (or that tracks none) does nothing.
  virtual void CancelInFlight() {}

  // CancelInFlight, and every call started from now on ends Cancelled at
  // once, for good: for a task that learned the job ended, whose servers
  // may be gone (a later call would wait for them until its deadline).
  virtual void Close() { CancelInFlight(); }

  // `elements` floats that this shard's bulk calls carry without a copy
  // (SharedBuffer), or null where it has none to give (no shared memory
  // with its server, or not enough of it): the caller uses ordinary memory.
  virtual std::shared_ptr<SharedBuffer> AllocateShared(int64_t elements) {
    (void)elements;
    return nullptr;
  }

  // Overwrites a chunk's values without copying them on the client.
  virtual void Assign(const AssignRequest& header, absl::Span<const float> data,
                      std::shared_ptr<const void> owner, absl::Time deadline,
                      std::function<void(absl::Status)> done) = 0;
};

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PS_SHARD_H_
