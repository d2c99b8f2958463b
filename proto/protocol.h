// Constants of the parameter-server wire protocol (see ps.proto), shared
// by servers and clients.
#ifndef PSFLOW_PROTO_PROTOCOL_H_
#define PSFLOW_PROTO_PROTOCOL_H_

#include <cstdint>

namespace psflow {

// The protocol version this build speaks. Bump it on any incompatible
// change; peers with another version fail with a message naming both.
// 2: pulls and pushes are batches only (1 also had single-chunk methods).
// 3: BOUNDED mode (WorkerClock on pulls and pushes, ExcludeWorkers).
// 4: embedding tables (EmbeddingTableSpec, PullRows, PushRows).
// 5: a push that answers with a pull (PushBatchRequest.then_pull).
inline constexpr uint32_t kProtocolVersion = 5;

// Bounds on what a Configure may ask of a server.
inline constexpr int32_t kMaxWorkers = 1 << 16;
inline constexpr int32_t kMaxStalenessBound = 1 << 20;

// Full method names of the bulk tensor RPCs.
inline constexpr char kBulkAssignMethod[] =
    "/psflow.ParameterServerBulk/Assign";
inline constexpr char kBulkPullBatchMethod[] =
    "/psflow.ParameterServerBulk/PullBatch";
inline constexpr char kBulkPushBatchMethod[] =
    "/psflow.ParameterServerBulk/PushBatch";
inline constexpr char kBulkPullRowsMethod[] =
    "/psflow.ParameterServerBulk/PullRows";
inline constexpr char kBulkPushRowsMethod[] =
    "/psflow.ParameterServerBulk/PushRows";

// At most this many ids in one PullRows/PushRows (all parts): 4M ids of
// dimension 16 are 256 MiB of rows, the bulk message limit below.
inline constexpr int64_t kMaxRowsPerRequest = int64_t{1} << 22;

// At most this many parts, and about this many header bytes (variable
// names dominate), in one PullBatch/PushBatch: a batch header stays well
// below the 64 KiB a receiver accepts (common/rpc/bulk_frame.h).
inline constexpr int kMaxBatchParts = 256;
inline constexpr int64_t kMaxBatchHeaderBytes = 32 * 1024;
// Header bytes a batch part costs beyond its variable name (a bound).
inline constexpr int64_t kBatchPartOverheadBytes = 48;

// Trailing metadata of a bulk call that named a shared-memory session the
// server no longer holds: the client attaches again.
inline constexpr char kSharedMemoryLostKey[] = "psflow-shared-memory";
inline constexpr char kSharedMemoryLostValue[] = "lost";

// Where a call's status says the same over the call ring in shared memory
// (an absl::Status payload), where no trailing metadata exists.
inline constexpr char kSharedMemoryLostPayloadUrl[] =
    "type.psflow.dev/shared-memory-lost";

// Methods of the call ring in shared memory (common/shared_call_ring.h):
// a PullBatch or a PushBatch (with or without then_pull), a PullRows or a
// PushRows, whose values (and a rows call's ids) lie in the client's
// region; the slot carries the request's serialized header and the
// answer's (docs/wire-protocol.md, "The call ring").
inline constexpr uint32_t kRingPullBatch = 1;
inline constexpr uint32_t kRingPushBatch = 2;
inline constexpr uint32_t kRingPullRows = 3;
inline constexpr uint32_t kRingPushRows = 4;
// Where a rows call's rows start in its piece of a client's region
// (PullRowsRequest.shared): past its `num_ids` ids, at the next multiple
// of 64 bytes.
inline constexpr int64_t RowsOffsetInPiece(int64_t num_ids) {
  return (num_ids * 8 + 63) / 64 * 64;
}
// Batches of more parts go over gRPC: their answers' per-part messages
// could outgrow a slot.
inline constexpr int kMaxRingBatchParts = 64;

// Large enough for any chunk plus its header; chunks are 1-4 MB by default.
inline constexpr int kMaxBulkMessageBytes = 256 << 20;

// The largest CreateVariables, RestoreShard or ExcludeWorkers request a
// parameter server parses (only once the caller is known to be the
// chief): parsed, their repeated fields take tens of times their wire
// size. A job of 100000 variables needs about 5 MiB.
inline constexpr int kMaxControlRequestBytes = 16 << 20;

}  // namespace psflow

#endif  // PSFLOW_PROTO_PROTOCOL_H_
