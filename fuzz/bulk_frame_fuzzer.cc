// Bulk frames: every pull, push and assign's bytes off the wire, parsed
// with each header message a server accepts.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "common/rpc/bulk_frame.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "proto/ps.pb.h"

namespace {

template <typename Header>
void ParseAs(const grpc::ByteBuffer& buffer) {
  Header header;
  absl::StatusOr<psflow::BulkFrame> frame =
      psflow::BulkFrame::Parse(buffer, header);
  if (!frame.ok()) return;
  // At most a few MB of floats: what a server would copy out.
  if (frame->payload_floats() > (size_t{1} << 22)) return;
  std::vector<float> out(frame->payload_floats());
  (void)frame->CopyPayload(absl::MakeSpan(out));
  if (out.size() >= 2) {
    std::vector<absl::Span<float>> pieces = {absl::MakeSpan(out).subspan(0, 1),
                                             absl::MakeSpan(out).subspan(1)};
    (void)frame->CopyPayload(pieces);
  }
  // Random access, as a server reads a TCP push's gradient in place: the
  // whole payload, its tail, and ranges past its end (refused).
  const size_t n = frame->payload_floats();
  for (const auto& [begin, count] : std::vector<std::pair<size_t, size_t>>{
           {0, n}, {n / 3, n - n / 3}, {n / 2, n - n / 2 + 1}, {n + 1, 0}}) {
    std::vector<float> piece(std::min(count, n + 1));
    (void)frame->ReadPayload(begin, absl::MakeSpan(piece));
  }
  // In place, as a server checks a TCP push: the runs must cover exactly
  // the payload's bytes, the copy's, in order.
  std::vector<char> runs;
  frame->ForEachPayloadRun([&runs](const char* bytes, size_t floats) {
    runs.insert(runs.end(), bytes, bytes + floats * sizeof(float));
  });
  if (runs.size() != n * sizeof(float) ||
      !std::equal(runs.begin(), runs.end(),
                  reinterpret_cast<const char*>(out.data()))) {
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Split the input over two slices, as gRPC may deliver it.
  const size_t half = size / 2;
  grpc::Slice slices[2] = {grpc::Slice(data, half),
                           grpc::Slice(data + half, size - half)};
  grpc::ByteBuffer buffer(slices, 2);
  ParseAs<psflow::PullBatchRequest>(buffer);
  ParseAs<psflow::PushBatchRequest>(buffer);
  ParseAs<psflow::AssignRequest>(buffer);
  ParseAs<psflow::PullBatchResponse>(buffer);
  return 0;
}
