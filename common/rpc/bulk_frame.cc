#include "common/rpc/bulk_frame.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace psflow {
namespace {

// Releases the owner handle when gRPC frees the payload slice.
void ReleaseOwner(void* user_data) {
  delete static_cast<std::shared_ptr<const void>*>(user_data);
}

size_t EncodeVarint32(uint32_t value, char* out) {
  size_t n = 0;
  while (value >= 0x80) {
    out[n++] = static_cast<char>(value | 0x80);
    value >>= 7;
  }
  out[n++] = static_cast<char>(value);
  return n;
}

}  // namespace

grpc::ByteBuffer EncodeBulkFrame(const google::protobuf::MessageLite& header,
                                 absl::Span<const float> payload,
                                 std::shared_ptr<const void> owner) {
  const absl::Span<const float> pieces[1] = {payload};
  return EncodeBulkFramePieces(header, pieces, std::move(owner));
}

grpc::ByteBuffer EncodeBulkFramePieces(
    const google::protobuf::MessageLite& header,
    absl::Span<const absl::Span<const float>> pieces,
    std::shared_ptr<const void> owner) {
  const size_t header_size = header.ByteSizeLong();
  std::string prefix(5 + header_size, '\0');
  size_t n = EncodeVarint32(static_cast<uint32_t>(header_size), &prefix[0]);
  header.SerializeWithCachedSizesToArray(
      reinterpret_cast<uint8_t*>(&prefix[n]));
  prefix.resize(n + header_size);
  std::vector<grpc::Slice> slices;
  slices.reserve(1 + pieces.size());
  slices.emplace_back(prefix);
  for (absl::Span<const float> piece : pieces) {
    if (piece.empty()) continue;
    // Each slice holds its own reference: gRPC may free them in any order.
    slices.emplace_back(const_cast<float*>(piece.data()),
                        piece.size() * sizeof(float), &ReleaseOwner,
                        new std::shared_ptr<const void>(owner));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

absl::StatusOr<BulkFrame> BulkFrame::Parse(
    const grpc::ByteBuffer& buffer, google::protobuf::MessageLite& header) {
  BulkFrame frame;
  grpc::Status dumped = buffer.Dump(&frame.slices_);
  if (!dumped.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bulk frame unreadable: ", dumped.error_message()));
  }
  // Reads bytes across slice boundaries from a cursor.
  size_t slice = 0, offset = 0;
  auto read_byte = [&](uint8_t& byte) {
    while (slice < frame.slices_.size() &&
           offset >= frame.slices_[slice].size()) {
      ++slice;
      offset = 0;
    }
    if (slice >= frame.slices_.size()) return false;
    byte = frame.slices_[slice].begin()[offset++];
    return true;
  };
  uint32_t header_size = 0;
  for (int shift = 0;; shift += 7) {
    uint8_t byte;
    if (shift > 28 || !read_byte(byte)) {
      return absl::InvalidArgumentError(
          "bulk frame truncated or garbled: no valid header size");
    }
    header_size |= static_cast<uint32_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) break;
  }
  if (header_size > kMaxBulkHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bulk frame header claims ", header_size, " bytes (limit ",
        kMaxBulkHeaderBytes, "); the peer is not speaking psflow's protocol"));
  }
  std::string header_bytes(header_size, '\0');
  for (uint32_t i = 0; i < header_size; ++i) {
    uint8_t byte;
    if (!read_byte(byte)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bulk frame truncated inside its ", header_size, "-byte header"));
    }
    header_bytes[i] = static_cast<char>(byte);
  }
  if (!header.ParseFromString(header_bytes)) {
    return absl::InvalidArgumentError("bulk frame header does not parse");
  }
  while (slice < frame.slices_.size() &&
         offset >= frame.slices_[slice].size()) {
    ++slice;
    offset = 0;
  }
  frame.payload_slice_ = slice;
  frame.payload_offset_ = offset;
  size_t bytes = 0;
  for (size_t s = slice; s < frame.slices_.size(); ++s) {
    bytes += frame.slices_[s].size() - (s == slice ? offset : 0);
  }
  if (bytes % sizeof(float) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bulk frame payload is ", bytes,
        " bytes, not a whole number of float32 values (truncated?)"));
  }
  frame.payload_bytes_ = bytes;
  // Where each payload slice starts in the payload, for ReadPayload.
  size_t start = 0;
  for (size_t s = slice; s < frame.slices_.size(); ++s) {
    frame.slice_starts_.push_back(start);
    start += frame.slices_[s].size() - (s == slice ? offset : 0);
  }
  return frame;
}

absl::Status BulkFrame::ReadPayload(size_t begin, absl::Span<float> out) const {
  if (begin > payload_floats() || out.size() > payload_floats() - begin) {
    return absl::InvalidArgumentError(
        absl::StrCat("payload floats [", begin, ", ", begin + out.size(),
                     ") are not inside the payload's ", payload_floats()));
  }
  if (out.empty()) return absl::OkStatus();
  // The slice holding the first byte, then bytewise across slices (floats
  // may straddle them).
  const size_t first = begin * sizeof(float);
  size_t i = static_cast<size_t>(
      std::upper_bound(slice_starts_.begin(), slice_starts_.end(), first) -
      slice_starts_.begin() - 1);
  size_t slice = payload_slice_ + i;
  size_t offset = first - slice_starts_[i] + (i == 0 ? payload_offset_ : 0);
  CopyFromSlices(out, slice, offset);
  return absl::OkStatus();
}

void BulkFrame::ForEachPayloadRun(
    absl::FunctionRef<void(const char* bytes, size_t floats)> fn) const {
  size_t left = payload_bytes_;
  char straddling[sizeof(float)];
  size_t carried = 0;  // bytes of a straddling float seen so far
  for (size_t s = payload_slice_; s < slices_.size() && left > 0; ++s) {
    const size_t skip = s == payload_slice_ ? payload_offset_ : 0;
    const char* bytes =
        reinterpret_cast<const char*>(slices_[s].begin()) + skip;
    size_t n = std::min(left, slices_[s].size() - skip);
    left -= n;
    if (carried > 0) {
      const size_t take = std::min(sizeof(float) - carried, n);
      std::memcpy(straddling + carried, bytes, take);
      carried += take;
      bytes += take;
      n -= take;
      if (carried < sizeof(float)) continue;
      fn(straddling, 1);
      carried = 0;
    }
    const size_t floats = n / sizeof(float);
    if (floats > 0) fn(bytes, floats);
    carried = n - floats * sizeof(float);
    std::memcpy(straddling, bytes + floats * sizeof(float), carried);
  }
}

void BulkFrame::CopyFromSlices(absl::Span<float> out, size_t& slice,
                               size_t& offset) const {
  char* dst = reinterpret_cast<char*>(out.data());
  size_t left = out.size() * sizeof(float);
  while (left > 0) {
    const size_t n = std::min(left, slices_[slice].size() - offset);
    std::memcpy(dst, slices_[slice].begin() + offset, n);
    dst += n;
    left -= n;
    offset += n;
    if (offset == slices_[slice].size()) {
      ++slice;
      offset = 0;
    }
  }
}

absl::Status BulkFrame::CopyPayload(absl::Span<float> out) const {
  const absl::Span<float> pieces[1] = {out};
  return CopyPayload(pieces);
}

absl::Status BulkFrame::CopyPayload(
    absl::Span<const absl::Span<float>> pieces) const {
  return CopyPayload(pieces, [](absl::Span<const float>) {});
}

absl::Status BulkFrame::CopyPayload(
    absl::Span<const absl::Span<float>> pieces,
    absl::FunctionRef<void(absl::Span<const float>)> copied) const {
  size_t wanted = 0;
  for (absl::Span<float> piece : pieces) wanted += piece.size();
  if (wanted * sizeof(float) != payload_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "payload holds ", payload_floats(), " values but the header says ",
        wanted, " (truncated or oversized payload)"));
  }
  // Walks the receive slices and the destination pieces side by side; a
  // float may straddle two slices, so the copy is bytewise.
  size_t slice = payload_slice_;
  size_t offset = payload_offset_;
  for (absl::Span<float> piece : pieces) {
    for (size_t block = 0; block < piece.size(); block += kCopyBlockFloats) {
      const absl::Span<float> to = piece.subspan(block, kCopyBlockFloats);
      CopyFromSlices(to, slice, offset);
      copied(to);
    }
  }
  return absl::OkStatus();
}

}  // namespace psflow
