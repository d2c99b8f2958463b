// What SharedMemoryShard's dense calls (shared_memory_shard.cc) and rows
// calls (shared_memory_shard_rows.cc) share: a piece of the region held by
// a call, a ring in the region, and the copies into and out of pieces.
// Private to SharedMemoryShard.
#ifndef PSFLOW_CLIENT_SHARED_MEMORY_SHARD_PARTS_H_
#define PSFLOW_CLIENT_SHARED_MEMORY_SHARD_PARTS_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/shared_memory_arena.h"
#include "client/shared_memory_shard.h"
#include "common/shared_call_ring_client.h"
#include "google/protobuf/message_lite.h"
#include "proto/ps.pb.h"

namespace psflow {

// Bytes of the region reserved for one call; freed when the last holder
// (the call, or a resend's frame) lets go.
struct SharedMemoryShard::Lease {
  Lease(std::shared_ptr<SharedMemoryArena> arena, uint64_t session,
        int64_t offset, int64_t bytes)
      : arena(std::move(arena)),
        session(session),
        offset(offset),
        bytes(bytes) {}
  // A retired piece is never handed out again: the server may still write
  // (a pull) or read (a push) it after the client gave up on the call.
  ~Lease() {
    if (!retired.load(std::memory_order_acquire)) arena->Free(offset);
  }
  float* values() const { return reinterpret_cast<float*>(arena->at(offset)); }
  SharedPayload payload() const {
    SharedPayload payload;
    payload.set_session(session);
    payload.set_offset(static_cast<uint64_t>(offset));
    payload.set_bytes(static_cast<uint64_t>(bytes));
    return payload;
  }

  const std::shared_ptr<SharedMemoryArena> arena;
  const uint64_t session;
  const int64_t offset;
  const int64_t bytes;
  // Set by a call's callback; read by AllocateShared's owner too.
  std::atomic<bool> retired{false};
};

// A call ring in a region: its memory (a piece of the arena, never
// handed out again) and the client end that posts calls into it.
struct SharedMemoryShard::Ring {
  std::shared_ptr<SharedMemoryArena> arena;  // holds the ring's memory
  int64_t offset = 0;
  uint64_t session = 0;  // the session the server serves it for
  std::unique_ptr<SharedCallRingClient> client;  // destroyed first
};

namespace shared_memory_shard_internal {

// A header the server answered through the ring.
template <typename Response>
absl::StatusOr<Response> ParseRingAnswer(absl::StatusOr<std::string> answer,
                                         const std::string& server) {
  if (!answer.ok()) return answer.status();
  Response response;
  if (!response.ParseFromString(*answer)) {
    return absl::InternalError(absl::StrCat(
        server, " answered a malformed header through the call ring"));
  }
  return response;
}

// Posts `header` on `ring` as `method`, its answer parsed into `done`'s
// Response; false, leaving `done` as it was, when the ring takes no more
// calls now (every slot busy, or lost).
template <typename Response>
bool PostOnRing(SharedCallRingClient& ring, uint32_t method,
                const google::protobuf::MessageLite& header,
                absl::Time deadline, const std::string& server,
                std::function<void(absl::StatusOr<Response>)>& done) {
  auto held = std::make_shared<std::function<void(absl::StatusOr<Response>)>>(
      std::move(done));
  SharedCallRingClient::Done on_answer =
      [held, server](absl::StatusOr<std::string> answer) {
        (*held)(ParseRingAnswer<Response>(std::move(answer), server));
      };
  if (ring.Call(method, header.SerializeAsString(), deadline, on_answer)) {
    return true;
  }
  done = std::move(*held);
  return false;
}

// Statuses that may be the client's own (deadline, cancel, broken
// connection) while the server still works on the call.
inline bool ServerMayStillUse(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kDataLoss:
      return true;
    default:
      return false;
  }
}

template <typename Span>
int64_t TotalBytes(const std::vector<Span>& pieces) {
  int64_t bytes = 0;
  for (const Span& piece : pieces) {
    bytes += static_cast<int64_t>(piece.size() * sizeof(float));
  }
  return bytes;
}

// The caller's pieces, back to back, into the region at `to`.
inline void CopyIn(const std::vector<absl::Span<const float>>& pieces,
                   float* to) {
  for (absl::Span<const float> piece : pieces) {
    to = std::copy(piece.begin(), piece.end(), to);
  }
}

// Back-to-back values in the region at `from`, out into the caller's
// pieces.
inline void CopyOut(const float* from,
                    const std::vector<absl::Span<float>>& out) {
  for (absl::Span<float> piece : out) {
    std::copy(from, from + piece.size(), piece.data());
    from += piece.size();
  }
}

// Spans over the copies CopyIn left at `at`, shaped as `pieces`.
inline std::vector<absl::Span<const float>> PiecesAt(
    const float* at, const std::vector<absl::Span<const float>>& pieces) {
  std::vector<absl::Span<const float>> spans;
  for (absl::Span<const float> piece : pieces) {
    spans.emplace_back(at, piece.size());
    at += piece.size();
  }
  return spans;
}

}  // namespace shared_memory_shard_internal
}  // namespace psflow

#endif  // PSFLOW_CLIENT_SHARED_MEMORY_SHARD_PARTS_H_
