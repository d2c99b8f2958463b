// Framing for bulk tensor RPCs (Pull, Push, Assign):
//
//   varint32(header size) | header (serialized protobuf) | payload
//
// The payload is raw little-endian float32 values. Encoding does not copy
// the payload: the frame's last slice points at the caller's memory, kept
// alive by an owner handle until gRPC has sent it. Decoding leaves the
// payload in gRPC's receive slices until the caller copies it once into its
// destination, or reads it piece by piece where it lies (ReadPayload). See
// docs/wire-protocol.md.
#ifndef PSFLOW_COMMON_RPC_BULK_FRAME_H_
#define PSFLOW_COMMON_RPC_BULK_FRAME_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the bulk wire format is little-endian float32; add byte "
              "swapping before building on a big-endian machine");

namespace psflow {

// Headers larger than this are garbage, not requests.
inline constexpr size_t kMaxBulkHeaderBytes = 64 * 1024;

// Builds a frame. `payload` must stay valid and unchanged until gRPC drops
// the frame; `owner` (may be null for empty payloads) is held until then.
grpc::ByteBuffer EncodeBulkFrame(const google::protobuf::MessageLite& header,
                                 absl::Span<const float> payload,
                                 std::shared_ptr<const void> owner);

// Same, with the payload in several pieces sent back to back (a batch's
// parts); each piece is one slice over the caller's memory.
grpc::ByteBuffer EncodeBulkFramePieces(
    const google::protobuf::MessageLite& header,
    absl::Span<const absl::Span<const float>> pieces,
    std::shared_ptr<const void> owner);

// A received frame whose payload is still in gRPC's slices.
class BulkFrame {
 public:
  // Parses the header into `header`. InvalidArgument for a truncated or
  // garbled frame, or a payload that is not a whole number of floats.
  static absl::StatusOr<BulkFrame> Parse(const grpc::ByteBuffer& buffer,
                                         google::protobuf::MessageLite& header);

  size_t payload_bytes() const { return payload_bytes_; }
  size_t payload_floats() const { return payload_bytes_ / sizeof(float); }

  // Copies the payload into `out`, which must hold exactly payload_floats()
  // values (InvalidArgument otherwise: a truncated or oversized payload).
  absl::Status CopyPayload(absl::Span<float> out) const;

  // Copies the payload into consecutive pieces, which together must hold
  // exactly payload_floats() values (InvalidArgument otherwise).
  absl::Status CopyPayload(absl::Span<const absl::Span<float>> pieces) const;

  // Same, calling `copied` on each stretch of a piece (at most
  // kCopyBlockFloats values) right after it was copied, while it is still
  // in the cache: a check over the values (NaN/Inf) costs no second pass
  // over memory. The stretches cover the pieces in order; nothing is
  // called when the sizes do not match.
  static constexpr size_t kCopyBlockFloats = 16 * 1024;  // 64 KiB
  absl::Status CopyPayload(
      absl::Span<const absl::Span<float>> pieces,
      absl::FunctionRef<void(absl::Span<const float>)> copied) const;

  // Copies payload floats [begin, begin + out.size()) into `out`, wherever
  // they lie in the slices: random access, for reading a push's gradient
  // block by block as the update consumes it instead of copying it whole
  // (ps/gradient.h). InvalidArgument for a range outside the payload.
  // Thread-safe: several threads may read one frame at once.
  absl::Status ReadPayload(size_t begin, absl::Span<float> out) const;

  // Calls fn(bytes, floats) over the whole payload where it lies, in
  // order: `floats` whole floats at `bytes`, at any alignment (read them
  // with memcpy or unaligned loads), or one float that straddled two
  // slices, assembled in a small buffer. One pass over the slices and no
  // copy: for a check of every value before any is used.
  void ForEachPayloadRun(
      absl::FunctionRef<void(const char* bytes, size_t floats)> fn) const;

 private:
  // Copies out.size() floats from the payload position (slice, offset)
  // on, bytewise across slices (a float may straddle two), and advances
  // the position past them. The caller checked they are in the payload.
  void CopyFromSlices(absl::Span<float> out, size_t& slice,
                      size_t& offset) const;

  BulkFrame() = default;
  std::vector<grpc::Slice> slices_;
  size_t payload_slice_ = 0;   // slice where the payload starts
  size_t payload_offset_ = 0;  // byte offset in that slice
  size_t payload_bytes_ = 0;
  // Payload byte at which each slice from payload_slice_ on starts.
  std::vector<size_t> slice_starts_;
};

}  // namespace psflow

#endif  // PSFLOW_COMMON_RPC_BULK_FRAME_H_
