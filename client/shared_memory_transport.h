// What a shard transport offers the shared-memory decorator
// (shared_memory_shard.h): carrying batches and rows calls whose values
// lie in a region the client attached (PullBatchRequest.shared,
// PushBatchRequest.shared, PullRowsRequest.shared, PushRowsRequest.shared:
// no payload either way), offering and detaching regions, and telling the
// decorator when the server forgot a session.
#ifndef PSFLOW_CLIENT_SHARED_MEMORY_TRANSPORT_H_
#define PSFLOW_CLIENT_SHARED_MEMORY_TRANSPORT_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/time/time.h"
#include "client/ps_shard.h"
#include "proto/protocol.h"
#include "proto/ps.pb.h"

namespace psflow {

class SharedMemoryTransport : public PsShard {
 public:
  // Offers a region to the server (waiting for the server to come up);
  // `done` runs exactly once, on a transport thread and never inside this
  // call: with the server's answer, or Cancelled after
  // CancelSharedMemoryOffers().
  virtual void OfferSharedMemory(
      const AttachSharedMemoryRequest& request,
      std::function<void(absl::StatusOr<AttachSharedMemoryResponse>)> done) = 0;
  virtual void CancelSharedMemoryOffers() = 0;

  // Tells the server to forget `session`; best effort, bounded by
  // `deadline` (a server that is gone forgets it anyway).
  virtual void DetachSharedMemory(uint64_t session, absl::Time deadline) = 0;
};

// The status of a call that named a shared-memory session the server no
// longer holds (it restarted, or the session sat idle): refused before
// anything was applied, so the call may be resent without the region.
inline absl::Status MarkSharedMemoryLost(absl::Status status) {
  status.SetPayload(kSharedMemoryLostPayloadUrl, absl::Cord("lost"));
  return status;
}

inline bool IsSharedMemoryLost(const absl::Status& status) {
  return status.GetPayload(kSharedMemoryLostPayloadUrl).has_value();
}

}  // namespace psflow

#endif  // PSFLOW_CLIENT_SHARED_MEMORY_TRANSPORT_H_
