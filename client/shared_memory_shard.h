// Same-host bulk data through shared memory, as a decorator over a shard
// transport (SharedMemoryTransport, e.g. GrpcPsShard).
//
// At construction it creates a region (a sealed memfd, common/
// shared_memory_region.h) and offers it to the server. Once the server
// attached it, each pull and push takes a piece of the region for its
// values and the transport carries only the header: no kernel TCP copies.
// Until then, when the server refuses (another host, --shared_memory=
// false), or when a call finds the region full, calls go to the transport
// unchanged (TCP). Control calls and assigns always pass straight through.
//
// In place: a caller that keeps its tensors in memory from AllocateShared
// (a worker's parameters and gradients) has its pulls and pushes name that
// memory itself, so not even the copy into or out of a piece is made. A
// call whose buffers are not one contiguous run of such memory (in the
// order of the batch's parts, at a 64-byte offset) takes a piece as above.
//
// Faults:
//  - a server that forgot the session (it restarted) refuses the call
//    before applying anything: the call is resent without the region and
//    the region is offered again;
//  - a pull that fails with Unavailable before its deadline is resent
//    without the region, never into the same piece;
//  - a call that ended on what may be the client's own error (deadline,
//    cancel, a broken connection) may still be served by the server, so
//    its piece is never handed out again; once half the region is given up
//    that way, a fresh region replaces it. An in-place call's memory is
//    given up the same way (SharedBuffer::retired), and such a call that
//    fails with Unavailable is not resent: the caller must move to fresh
//    memory first.
//
// The call ring: with a region it also offers the server a call ring in
// it (common/shared_call_ring.h). A server that serves it takes these
// calls' headers through the ring, with futex doorbells, instead of a gRPC
// call each; control calls, calls without the region, batches too large
// for a slot, and every call once the ring lost its server still go to the
// transport. The rules above hold for calls on the ring as they are.
//
// Rows (embedding tables) go the same way: a rows call takes one piece of
// the region for its ids and its rows (PullRowsRequest.shared).
//
// Thread-safe. The destructor waits for the calls it started and detaches
// the region before the transport goes.
#ifndef PSFLOW_CLIENT_SHARED_MEMORY_SHARD_H_
#define PSFLOW_CLIENT_SHARED_MEMORY_SHARD_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "client/shared_memory_arena.h"
#include "client/shared_memory_transport.h"
#include "common/mutex.h"

namespace psflow {

// The AttachSharedMemory request that offers `region` of this process to
// a server on this host.
AttachSharedMemoryRequest AttachRequestFor(const SharedMemoryRegion& region);

class SharedMemoryShard final : public PsShard {
 public:
  // `region_bytes` (rounded up to whole pages) is an upper bound: pages are
  // touched only as calls use them, first fit from the start.
  SharedMemoryShard(std::unique_ptr<SharedMemoryTransport> transport,
                    int64_t region_bytes, bool call_ring = true);
  ~SharedMemoryShard() override;

  const std::string& name() const override { return transport_->name(); }
  absl::StatusOr<ConfigureResponse> Configure(const ConfigureRequest& request,
                                              absl::Time deadline) override {
    return transport_->Configure(request, deadline);
  }
  absl::Status CreateVariables(const CreateVariablesRequest& request,
                               absl::Time deadline) override {
    return transport_->CreateVariables(request, deadline);
  }
  absl::StatusOr<StatsResponse> Stats(absl::Time deadline) override {
    return transport_->Stats(deadline);
  }
  absl::Status Shutdown(const std::string& reason,
                        absl::Time deadline) override {
    return transport_->Shutdown(reason, deadline);
  }
  absl::Status ExcludeWorkers(const ExcludeWorkersRequest& request,
                              absl::Time deadline) override {
    return transport_->ExcludeWorkers(request, deadline);
  }
  absl::StatusOr<HoldResponse> Hold(const HoldRequest& request,
                                    absl::Time deadline) override {
    return transport_->Hold(request, deadline);
  }
  absl::StatusOr<SaveShardResponse> SaveShard(const SaveShardRequest& request,
                                              absl::Time deadline) override {
    return transport_->SaveShard(request, deadline);
  }
  absl::StatusOr<RestoreShardResponse> RestoreShard(
      const RestoreShardRequest& request, absl::Time deadline) override {
    return transport_->RestoreShard(request, deadline);
  }
  void Assign(const AssignRequest& header, absl::Span<const float> data,
              std::shared_ptr<const void> owner, absl::Time deadline,
              std::function<void(absl::Status)> done) override {
    transport_->Assign(header, data, std::move(owner), deadline,
                       std::move(done));
  }

  void CancelInFlight() override;
  // The job is over: calls cancelled from now on still give up their
  // memory, but quietly, and no fresh region is offered for them.
  void Close() override;

  // Ids and rows through a piece of the region (see above).
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
  // Both halves through one piece of the region (or both over the
  // transport, as PushBatch decides).
  void PushThenPull(
      const PushBatchRequest& header, std::vector<absl::Span<const float>> data,
      std::shared_ptr<const void> owner, std::vector<absl::Span<float>> out,
      absl::Time deadline,
      std::function<void(absl::StatusOr<PushBatchResponse>)> done) override;

  // A piece of the region held until the last reference goes, for calls in
  // place (see above); null before the server attached the region (waiting
  // up to a few seconds for the first offer's answer), while a later offer
  // is pending, or when the region is full.
  std::shared_ptr<SharedBuffer> AllocateShared(int64_t elements) override;

  // Waits until the offer is settled, at most `timeout`; returns whether
  // calls now go through shared memory.
  bool WaitForSharedMemory(absl::Duration timeout);
  // Bytes of the region held by calls in flight, plus those given up after
  // a call ended while the server might still use them.
  int64_t shared_memory_bytes_held() const;
  // Tensor bytes that calls copied into or out of a piece, and that calls
  // in place carried without a copy.
  int64_t bytes_copied() const {
    return bytes_copied_.load(std::memory_order_relaxed);
  }
  int64_t bytes_in_place() const {
    return bytes_in_place_.load(std::memory_order_relaxed);
  }
  // Whether calls now go through a call ring, and how many it answered.
  bool ring_in_use() const;
  int64_t ring_calls() const;

 private:
  struct Lease;
  class PinnedBuffer;
  struct Ring;
  // Where an in-place call's values lie, and the memory that holds them.
  struct InPlace {
    std::shared_ptr<Lease> lease;
    SharedPayload payload;
  };
  enum class State { kOff, kAttaching, kAttached };

  // Offers the current region; the answer arrives on a transport thread.
  void StartOffer() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `bytes` of the region for one call, or null: the call goes without.
  std::shared_ptr<Lease> LeasePiece(int64_t bytes);
  // The server forgot `session`: offer the region again.
  void OnLost(uint64_t session);
  // A call gave up on its piece (`why`); replaces the region once half of
  // it is given up.
  void RetirePiece(Lease& lease, const absl::Status& why);
  // The in-place run `pieces` form (see above), counted as a call started,
  // or nullopt: the call takes a piece instead.
  template <typename Span>
  std::optional<InPlace> FindInPlace(const std::vector<Span>& pieces);
  // Counts a call that will call back into this object, and its end.
  void CallStarted();
  void CallEnded();

  // Carry a batch whose values lie in the region (its `shared` set):
  // through the ring of its session when that takes it, else over the
  // transport.
  void SendShared(const PullBatchRequest& header, absl::Time deadline,
                  std::function<void(absl::StatusOr<PullBatchResponse>)> done);
  void SendShared(const PushBatchRequest& header, absl::Time deadline,
                  std::function<void(absl::StatusOr<PushBatchResponse>)> done);
  // The ring serving `session`, or null.
  std::shared_ptr<Ring> RingFor(uint64_t session);
  // The same for rows calls (shared_memory_shard_rows.cc).
  void SendShared(const PullRowsRequest& header, absl::Time deadline,
                  std::function<void(absl::StatusOr<PullRowsResponse>)> done);
  void SendShared(const PushRowsRequest& header, absl::Time deadline,
                  std::function<void(absl::StatusOr<PushRowsResponse>)> done);
  struct RowsPull;
  struct RowsPush;
  void OnRowsPulled(RowsPull& call, absl::StatusOr<PullRowsResponse> answer);
  void OnRowsPushed(RowsPush& call, absl::StatusOr<PushRowsResponse> answer);

  void PullVia(PullBatchRequest header, std::vector<absl::Span<float>> out,
               absl::Time deadline,
               std::function<void(absl::StatusOr<PullBatchResponse>)> done,
               std::shared_ptr<Lease> lease);
  void PushVia(PushBatchRequest header,
               std::vector<absl::Span<const float>> data,
               std::shared_ptr<const void> owner, absl::Time deadline,
               std::function<void(absl::StatusOr<PushBatchResponse>)> done,
               std::shared_ptr<Lease> lease);
  // Ends a pull through the region that failed with `status`: its memory
  // is given up when the server may still write it; then `done`, then the
  // call's end.
  void FailPull(
      std::shared_ptr<Lease> lease, const absl::Status& status,
      const std::function<void(absl::StatusOr<PullBatchResponse>)>& done);
  // InternalError unless the server answered `answered` entries (versions,
  // results) for `parts` parts; `call` ("pull from") leads the message.
  absl::Status AllPartsAnswered(absl::string_view call, int answered,
                                size_t parts) const;
  void PullInPlace(PullBatchRequest header, std::vector<absl::Span<float>> out,
                   absl::Time deadline,
                   std::function<void(absl::StatusOr<PullBatchResponse>)> done,
                   InPlace in_place);
  void PushInPlace(PushBatchRequest header,
                   std::vector<absl::Span<const float>> data,
                   std::shared_ptr<const void> owner, absl::Time deadline,
                   std::function<void(absl::StatusOr<PushBatchResponse>)> done,
                   InPlace in_place);
  void PushThenPullInPlace(
      PushBatchRequest header, std::vector<absl::Span<const float>> data,
      std::shared_ptr<const void> owner, std::vector<absl::Span<float>> out,
      absl::Time deadline,
      std::function<void(absl::StatusOr<PushBatchResponse>)> done, InPlace push,
      InPlace pull);

  const std::unique_ptr<SharedMemoryTransport> transport_;
  const bool call_ring_;

  mutable Mutex mu_;
  // Null: no region (creating it failed). Replaced once half of it is
  // given up.
  std::shared_ptr<SharedMemoryArena> arena_ ABSL_GUARDED_BY(mu_);
  State state_ ABSL_GUARDED_BY(mu_) = State::kOff;
  uint64_t session_ ABSL_GUARDED_BY(mu_) = 0;
  bool ever_attached_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;  // Close() was called
  // Offers and region calls whose callbacks have yet to run.
  int calls_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  // AllocateShared's pieces by first address (expired ones pruned as new
  // ones come).
  std::map<uintptr_t, std::weak_ptr<Lease>> pinned_ ABSL_GUARDED_BY(mu_);
  // The ring of the current session, if the server serves one; and every
  // ring ever started, kept until the destructor (a ring's own thread
  // delivers answers, so it is never stopped from a callback).
  std::shared_ptr<Ring> ring_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Ring>> rings_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> bytes_copied_{0};
  std::atomic<int64_t> bytes_in_place_{0};
};

}  // namespace psflow

#endif  // PSFLOW_CLIENT_SHARED_MEMORY_SHARD_H_
