// The parts of a bulk call through a client's shared memory that every
// transport carrying such calls shares (the gRPC bulk service and the
// call ring): where a pull's values go, and a push applied from the
// client's memory. `caller` names who called (the session must be its
// own: SharedMemorySessions::Resolve).
#ifndef PSFLOW_PS_SHARED_MEMORY_CALLS_H_
#define PSFLOW_PS_SHARED_MEMORY_CALLS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/ps.pb.h"
#include "ps/embedding_table.h"
#include "ps/ps_service.h"
#include "ps/shared_memory_sessions.h"

namespace psflow {

// Where a shared-memory pull writes: one piece per part, in order, and the
// mapping that holds them (keep it until the pull is answered).
struct SharedPullTarget {
  SharedMemorySessions::Payload payload;
  std::vector<absl::Span<float>> pieces;
};

// The pieces `request.shared()` names for the request's parts (each part
// bounded by a chunk before the sizes are summed).
absl::StatusOr<SharedPullTarget> ResolveSharedPull(
    PsService& service, SharedMemorySessions& sessions,
    absl::string_view caller, const PullBatchRequest& request);

// Applies a push whose gradients lie in the client's memory
// (`request.shared()`), read where they lie: checked whole for NaN/Inf
// first; then every update reads as 0 a value that the client has made
// non-finite since (ps/finite_values.h). A batch that fails the check is
// copied out, so that the core words and rejects a value the client can
// no longer change.
absl::StatusOr<PushBatchResponse> PushFromSharedMemory(
    PsService& service, SharedMemorySessions& sessions,
    absl::string_view caller, const PushBatchRequest& request);

// A rows call whose ids and rows lie in the client's region
// (PullRowsRequest.shared, PushRowsRequest.shared).
struct SharedRows {
  SharedMemorySessions::Payload payload;  // holds the mapping
  std::vector<EmbeddingTable*> tables;
  // Copied out once: the client could change them while they are used.
  std::vector<int64_t> ids;
  std::vector<absl::Span<const int64_t>> part_ids;
  // Each part's rows in the region (ids x its table's dim).
  std::vector<absl::Span<float>> rows;
};

// The tables, ids and rows `shared` names for `parts` (the parts checked
// as over gRPC before any size is computed).
absl::StatusOr<std::unique_ptr<SharedRows>> ResolveSharedRows(
    PsService& service, SharedMemorySessions& sessions,
    absl::string_view caller, uint32_t protocol_version,
    const google::protobuf::RepeatedPtrField<RowsPart>& parts,
    const SharedPayload& shared);

// Applies a rows push whose ids and gradients lie in the client's memory,
// both copied out once before any check, as PushFromSharedMemory does.
absl::StatusOr<PushRowsResponse> PushRowsFromSharedMemory(
    PsService& service, SharedMemorySessions& sessions,
    absl::string_view caller, const PushRowsRequest& request);

// A push with then_pull serves its pull only when every part was applied
// (a part refused alone, stale in sync mode, fails the call: the pull would
// not read this push's update).
absl::Status AppliedWhole(const PushBatchResponse& response);

}  // namespace psflow

#endif  // PSFLOW_PS_SHARED_MEMORY_CALLS_H_
