// Constants of the parameter-server wire protocol (see ps.proto), shared
// by servers and clients.
#ifndef PSFLOW_PROTO_PROTOCOL_H_
#define PSFLOW_PROTO_PROTOCOL_H_

#include <cstdint>

namespace psflow {

// The protocol version this build speaks. Bump it on any incompatible
// change; peers with another version fail with a message naming both.
inline constexpr uint32_t kProtocolVersion = 1;

// Full method names of the bulk tensor RPCs.
inline constexpr char kBulkPullMethod[] = "/psflow.ParameterServerBulk/Pull";
inline constexpr char kBulkPushMethod[] = "/psflow.ParameterServerBulk/Push";
inline constexpr char kBulkAssignMethod[] =
    "/psflow.ParameterServerBulk/Assign";
inline constexpr char kBulkPullBatchMethod[] =
    "/psflow.ParameterServerBulk/PullBatch";
inline constexpr char kBulkPushBatchMethod[] =
    "/psflow.ParameterServerBulk/PushBatch";

// At most this many parts in one PullBatch/PushBatch (keeps headers far
// below kMaxBulkHeaderBytes).
inline constexpr int kMaxBatchParts = 256;

// Large enough for any chunk plus its header; chunks are 1-4 MB by default.
inline constexpr int kMaxBulkMessageBytes = 256 << 20;

}  // namespace psflow

#endif  // PSFLOW_PROTO_PROTOCOL_H_
