// SharedMemoryShard's rows calls (embedding tables): their ids and rows
// through a piece of the region, the call on the ring where one serves it
// (shared_memory_shard.h).
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/shared_memory_shard.h"
#include "client/shared_memory_shard_parts.h"
#include "proto/protocol.h"

namespace psflow {

using shared_memory_shard_internal::CopyIn;
using shared_memory_shard_internal::CopyOut;
using shared_memory_shard_internal::PiecesAt;
using shared_memory_shard_internal::PostOnRing;
using shared_memory_shard_internal::ServerMayStillUse;
using shared_memory_shard_internal::TotalBytes;

namespace {

int64_t CountIds(const std::vector<absl::Span<const int64_t>>& ids) {
  int64_t n = 0;
  for (absl::Span<const int64_t> part : ids) {
    n += static_cast<int64_t>(part.size());
  }
  return n;
}

// Whether the header names one id list and one buffer per part, each with
// the part's count of ids; calls that do not go without the region, where
// the transport words the errors.
template <typename Header, typename Buffers>
bool RowsShapesMatch(const Header& header,
                     const std::vector<absl::Span<const int64_t>>& ids,
                     const Buffers& buffers) {
  if (header.parts_size() == 0 ||
      header.parts_size() != static_cast<int>(ids.size()) ||
      ids.size() != buffers.size()) {
    return false;
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (header.parts(static_cast<int>(i)).num_ids() !=
            static_cast<int64_t>(ids[i].size()) ||
        ids[i].empty()) {
      return false;
    }
  }
  return true;
}

// The ids, back to back, at the start of a piece.
void CopyIds(const std::vector<absl::Span<const int64_t>>& ids, char* to) {
  for (absl::Span<const int64_t> part : ids) {
    std::memcpy(to, part.data(), part.size() * sizeof(int64_t));
    to += part.size() * sizeof(int64_t);
  }
}

// Spans over the copies CopyIds left at `at`, shaped as `ids`.
std::vector<absl::Span<const int64_t>> IdsAt(
    const char* at, const std::vector<absl::Span<const int64_t>>& ids) {
  std::vector<absl::Span<const int64_t>> spans;
  const auto* from = reinterpret_cast<const int64_t*>(at);
  for (absl::Span<const int64_t> part : ids) {
    spans.emplace_back(from, part.size());
    from += part.size();
  }
  return spans;
}

}  // namespace

// A rows pull on the ring: what it needs to finish, or to be resent over
// the transport.
struct SharedMemoryShard::RowsPull {
  PullRowsRequest header;  // without `shared`
  std::vector<absl::Span<const int64_t>> ids;
  std::vector<absl::Span<float>> out;
  absl::Time deadline;
  std::function<void(absl::StatusOr<PullRowsResponse>)> done;
  std::shared_ptr<Lease> lease;
  int64_t rows_offset = 0;  // from the piece's start
};

struct SharedMemoryShard::RowsPush {
  PushRowsRequest header;  // without `shared`
  std::vector<absl::Span<const int64_t>> ids;
  std::vector<absl::Span<const float>> gradients;
  absl::Time deadline;
  std::function<void(absl::StatusOr<PushRowsResponse>)> done;
  std::shared_ptr<Lease> lease;
};

void SharedMemoryShard::SendShared(
    const PullRowsRequest& header, absl::Time deadline,
    std::function<void(absl::StatusOr<PullRowsResponse>)> done) {
  std::shared_ptr<Ring> ring = header.parts_size() <= kMaxRingBatchParts
                                   ? RingFor(header.shared().session())
                                   : nullptr;
  if (ring != nullptr && PostOnRing(*ring->client, kRingPullRows, header,
                                    deadline, name(), done)) {
    return;
  }
  transport_->PullRows(header, {}, {}, deadline, std::move(done));
}

void SharedMemoryShard::SendShared(
    const PushRowsRequest& header, absl::Time deadline,
    std::function<void(absl::StatusOr<PushRowsResponse>)> done) {
  std::shared_ptr<Ring> ring = header.parts_size() <= kMaxRingBatchParts
                                   ? RingFor(header.shared().session())
                                   : nullptr;
  if (ring != nullptr && PostOnRing(*ring->client, kRingPushRows, header,
                                    deadline, name(), done)) {
    return;
  }
  transport_->PushRows(header, {}, {}, nullptr, deadline, std::move(done));
}

void SharedMemoryShard::PullRows(
    const PullRowsRequest& header, std::vector<absl::Span<const int64_t>> ids,
    std::vector<absl::Span<float>> out, absl::Time deadline,
    std::function<void(absl::StatusOr<PullRowsResponse>)> done) {
  const int64_t rows_offset = RowsOffsetInPiece(CountIds(ids));
  std::shared_ptr<Lease> lease = RowsShapesMatch(header, ids, out)
                                     ? LeasePiece(rows_offset + TotalBytes(out))
                                     : nullptr;
  if (lease == nullptr) {
    return transport_->PullRows(header, std::move(ids), std::move(out),
                                deadline, std::move(done));
  }
  CopyIds(ids, lease->arena->at(lease->offset));
  PullRowsRequest shared_header = header;
  *shared_header.mutable_shared() = lease->payload();
  auto call = std::make_shared<RowsPull>();
  call->header = header;
  call->ids = std::move(ids);
  call->out = std::move(out);
  call->deadline = deadline;
  call->done = std::move(done);
  call->lease = std::move(lease);
  call->rows_offset = rows_offset;
  SendShared(shared_header, deadline,
             [this, call](absl::StatusOr<PullRowsResponse> answer) {
               OnRowsPulled(*call, std::move(answer));
             });
}

void SharedMemoryShard::OnRowsPulled(RowsPull& call,
                                     absl::StatusOr<PullRowsResponse> answer) {
  if (!answer.ok()) {
    const absl::Status& status = answer.status();
    const bool lost = IsSharedMemoryLost(status);
    if (lost || (status.code() == absl::StatusCode::kUnavailable &&
                 absl::Now() < call.deadline)) {
      // Resent over the transport, never into the same piece, which a
      // first attempt that reached the server may still fill.
      if (lost) {
        OnLost(call.lease->session);
      } else {
        RetirePiece(*call.lease, status);
      }
      call.lease.reset();
      transport_->PullRows(call.header, std::move(call.ids),
                           std::move(call.out), call.deadline,
                           std::move(call.done));
      return CallEnded();
    }
    if (ServerMayStillUse(status.code())) RetirePiece(*call.lease, status);
    call.lease.reset();
    call.done(status);
    return CallEnded();
  }
  if (absl::Status all = AllPartsAnswered(
          "rows pull from", answer->versions_size(), call.out.size());
      !all.ok()) {
    call.lease.reset();
    call.done(all);
    return CallEnded();
  }
  CopyOut(reinterpret_cast<const float*>(
              call.lease->arena->at(call.lease->offset + call.rows_offset)),
          call.out);
  bytes_copied_.fetch_add(TotalBytes(call.out), std::memory_order_relaxed);
  call.lease.reset();
  call.done(std::move(answer));
  CallEnded();
}

void SharedMemoryShard::PushRows(
    const PushRowsRequest& header, std::vector<absl::Span<const int64_t>> ids,
    std::vector<absl::Span<const float>> gradients,
    std::shared_ptr<const void> owner, absl::Time deadline,
    std::function<void(absl::StatusOr<PushRowsResponse>)> done) {
  const int64_t rows_offset = RowsOffsetInPiece(CountIds(ids));
  std::shared_ptr<Lease> lease =
      RowsShapesMatch(header, ids, gradients)
          ? LeasePiece(rows_offset + TotalBytes(gradients))
          : nullptr;
  if (lease == nullptr) {
    return transport_->PushRows(header, std::move(ids), std::move(gradients),
                                std::move(owner), deadline, std::move(done));
  }
  // One copy into the region; the caller's buffers are free from here on.
  char* piece = lease->arena->at(lease->offset);
  CopyIds(ids, piece);
  CopyIn(gradients, reinterpret_cast<float*>(piece + rows_offset));
  bytes_copied_.fetch_add(TotalBytes(gradients), std::memory_order_relaxed);
  PushRowsRequest shared_header = header;
  *shared_header.mutable_shared() = lease->payload();
  auto call = std::make_shared<RowsPush>();
  call->header = header;
  // A resend reads the copies, which live as long as the piece.
  call->ids = IdsAt(piece, ids);
  call->gradients =
      PiecesAt(reinterpret_cast<const float*>(piece + rows_offset), gradients);
  call->deadline = deadline;
  call->done = std::move(done);
  call->lease = std::move(lease);
  SendShared(shared_header, deadline,
             [this, call](absl::StatusOr<PushRowsResponse> answer) {
               OnRowsPushed(*call, std::move(answer));
             });
}

void SharedMemoryShard::OnRowsPushed(RowsPush& call,
                                     absl::StatusOr<PushRowsResponse> answer) {
  if (!answer.ok() && IsSharedMemoryLost(answer.status())) {
    // Refused before anything was applied: resent over the transport from
    // the copies, which the resend's frame keeps alive.
    OnLost(call.lease->session);
    transport_->PushRows(call.header, std::move(call.ids),
                         std::move(call.gradients), std::move(call.lease),
                         call.deadline, std::move(call.done));
    return CallEnded();
  }
  if (!answer.ok() && ServerMayStillUse(answer.status().code())) {
    RetirePiece(*call.lease, answer.status());
  }
  call.lease.reset();
  if (answer.ok()) {
    if (absl::Status all =
            AllPartsAnswered("rows push to", answer->results_size(),
                             static_cast<size_t>(call.header.parts_size()));
        !all.ok()) {
      call.done(all);
      return CallEnded();
    }
  }
  call.done(std::move(answer));
  CallEnded();
}

}  // namespace psflow
