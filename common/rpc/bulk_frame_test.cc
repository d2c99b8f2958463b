#include "common/rpc/bulk_frame.h"

#include <numeric>
#include <string>
#include <vector>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/ps.pb.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

PushRequest Header() {
  PushRequest header;
  header.set_protocol_version(1);
  header.set_variable("dense/kernel");
  header.set_offset_elements(524288);
  header.set_num_elements(5);
  header.set_version(42);
  return header;
}

// Re-slices a frame's bytes at arbitrary points, as the network does.
grpc::ByteBuffer Resliced(const grpc::ByteBuffer& frame,
                          std::vector<size_t> cuts) {
  grpc::Slice whole;
  EXPECT_TRUE(frame.DumpToSingleSlice(&whole).ok());
  std::string bytes(reinterpret_cast<const char*>(whole.begin()), whole.size());
  std::vector<grpc::Slice> slices;
  size_t start = 0;
  cuts.push_back(bytes.size());
  for (size_t cut : cuts) {
    slices.emplace_back(bytes.substr(start, cut - start));
    start = cut;
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

TEST(BulkFrameTest, RoundTripsHeaderAndPayload) {
  auto payload = std::make_shared<std::vector<float>>(
      std::vector<float>{1.5f, -2.0f, 3.25f, 0.0f, 1e-30f});
  grpc::ByteBuffer frame = EncodeBulkFrame(Header(), *payload, payload);
  PushRequest header;
  ASSERT_OK_AND_ASSIGN(BulkFrame parsed, BulkFrame::Parse(frame, header));
  EXPECT_EQ(header.variable(), "dense/kernel");
  EXPECT_EQ(header.offset_elements(), 524288);
  EXPECT_EQ(header.version(), 42);
  ASSERT_EQ(parsed.payload_floats(), 5u);
  std::vector<float> out(5);
  ASSERT_OK(parsed.CopyPayload(absl::MakeSpan(out)));
  EXPECT_EQ(out, *payload);
}

TEST(BulkFrameTest, EncodingDoesNotCopyThePayload) {
  auto payload = std::make_shared<std::vector<float>>(1 << 20, 1.0f);
  std::weak_ptr<std::vector<float>> weak = payload;
  {
    grpc::ByteBuffer frame = EncodeBulkFrame(Header(), *payload, payload);
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(frame.Dump(&slices).ok());
    ASSERT_EQ(slices.size(), 2u);
    EXPECT_EQ(reinterpret_cast<const void*>(slices[1].begin()),
              reinterpret_cast<const void*>(payload->data()));
    payload.reset();
    EXPECT_FALSE(weak.expired()) << "the frame must keep its payload alive";
  }
  EXPECT_TRUE(weak.expired()) << "the frame must release its payload";
}

TEST(BulkFrameTest, ParsesFramesSplitAcrossSlicesAnywhere) {
  std::vector<float> values(100);
  std::iota(values.begin(), values.end(), 0.0f);
  auto owner = std::make_shared<std::vector<float>>(values);
  grpc::ByteBuffer frame = EncodeBulkFrame(Header(), *owner, owner);
  for (std::vector<size_t> cuts :
       {std::vector<size_t>{1}, {1, 2, 3}, {7}, {20, 21, 203}, {41, 42}}) {
    PushRequest header;
    ASSERT_OK_AND_ASSIGN(BulkFrame parsed,
                         BulkFrame::Parse(Resliced(frame, cuts), header));
    EXPECT_EQ(header.variable(), "dense/kernel");
    std::vector<float> out(100);
    ASSERT_OK(parsed.CopyPayload(absl::MakeSpan(out)));
    EXPECT_EQ(out, values);
  }
}

// Batches: pieces from separate buffers go out back to back and come back
// into separate buffers, whatever the receive slicing (cuts inside floats
// and on piece boundaries).
TEST(BulkFrameTest, PiecesRoundTripIntoSeparateBuffers) {
  auto owner = std::make_shared<std::vector<std::vector<float>>>(
      std::vector<std::vector<float>>{{1, 2, 3}, {}, {4}, {5, 6, 7, 8}});
  std::vector<absl::Span<const float>> pieces((*owner).begin(), (*owner).end());
  std::weak_ptr<std::vector<std::vector<float>>> weak = owner;
  grpc::ByteBuffer frame = EncodeBulkFramePieces(Header(), pieces, owner);
  owner.reset();
  EXPECT_FALSE(weak.expired());  // The frame's slices hold the owner.
  PushRequest header;
  ASSERT_OK_AND_ASSIGN(BulkFrame direct, BulkFrame::Parse(frame, header));
  EXPECT_EQ(direct.payload_floats(), 8u);
  const size_t header_end = frame.Length() - 8 * sizeof(float);
  for (const std::vector<size_t>& cuts : std::vector<std::vector<size_t>>{
           {},
           {header_end + 1, header_end + 13},
           {header_end + 12, header_end + 16},
           {header_end + 2, header_end + 3, header_end + 30}}) {
    ASSERT_OK_AND_ASSIGN(BulkFrame parsed,
                         BulkFrame::Parse(Resliced(frame, cuts), header));
    std::vector<float> a(3), b(0), c(1), d(4);
    const absl::Span<float> out[] = {absl::MakeSpan(a), absl::MakeSpan(b),
                                     absl::MakeSpan(c), absl::MakeSpan(d)};
    ASSERT_OK(parsed.CopyPayload(out));
    EXPECT_EQ(a, (std::vector<float>{1, 2, 3}));
    EXPECT_EQ(c, (std::vector<float>{4}));
    EXPECT_EQ(d, (std::vector<float>{5, 6, 7, 8}));
  }
  frame.Clear();
  direct = *BulkFrame::Parse(EncodeBulkFrame(Header(), {}, nullptr), header);
  EXPECT_TRUE(weak.expired());
}

// The visiting copy hands over every copied stretch once, in order, each
// within one piece and at most kCopyBlockFloats long.
TEST(BulkFrameTest, CopyVisitsEveryCopiedStretchInOrder) {
  const size_t block = BulkFrame::kCopyBlockFloats;
  auto owner = std::make_shared<std::vector<float>>(2 * block + 7 + 3);
  std::iota(owner->begin(), owner->end(), 0.0f);
  grpc::ByteBuffer frame = EncodeBulkFrame(Header(), *owner, owner);
  const size_t header_end = frame.Length() - owner->size() * sizeof(float);
  PushRequest header;
  ASSERT_OK_AND_ASSIGN(
      BulkFrame parsed,
      BulkFrame::Parse(Resliced(frame, {header_end + 5, header_end + 40001}),
                       header));
  std::vector<float> a(2 * block + 7), b(3);
  const absl::Span<float> out[] = {absl::MakeSpan(a), absl::MakeSpan(b)};
  std::vector<std::pair<const float*, size_t>> visits;
  std::vector<float> seen;
  ASSERT_OK(parsed.CopyPayload(out, [&](absl::Span<const float> copied) {
    visits.emplace_back(copied.data(), copied.size());
    seen.insert(seen.end(), copied.begin(), copied.end());
  }));
  EXPECT_EQ(seen, *owner);  // the values as copied, each once, in order
  const std::vector<std::pair<const float*, size_t>> expected = {
      {a.data(), block},
      {a.data() + block, block},
      {a.data() + 2 * block, 7},
      {b.data(), 3}};
  EXPECT_EQ(visits, expected);
  std::vector<float> whole(owner->size());
  EXPECT_OK(parsed.CopyPayload(absl::MakeSpan(whole)));
  EXPECT_EQ(whole, *owner);
}

// Random access into the payload, wherever the slices are cut (inside
// floats, at the header's end), and a range outside it refused.
TEST(BulkFrameTest, ReadPayloadReadsAnyRangeAcrossSlices) {
  auto owner = std::make_shared<std::vector<float>>(1000);
  std::iota(owner->begin(), owner->end(), 0.0f);
  grpc::ByteBuffer frame = EncodeBulkFrame(Header(), *owner, owner);
  const size_t header_end = frame.Length() - owner->size() * sizeof(float);
  for (const std::vector<size_t>& cuts : std::vector<std::vector<size_t>>{
           {},
           {header_end},
           {header_end - 1, header_end + 3, header_end + 1001},
           {header_end + 2, header_end + 6, header_end + 7,
            header_end + 3999}}) {
    PushRequest header;
    ASSERT_OK_AND_ASSIGN(BulkFrame parsed,
                         BulkFrame::Parse(Resliced(frame, cuts), header));
    for (const auto& [begin, n] : std::vector<std::pair<size_t, size_t>>{
             {0, 1000}, {0, 1}, {1, 2}, {250, 500}, {999, 1}, {1000, 0}}) {
      std::vector<float> out(n, -1.0f);
      ASSERT_OK(parsed.ReadPayload(begin, absl::MakeSpan(out)));
      EXPECT_EQ(out, std::vector<float>(owner->begin() + begin,
                                        owner->begin() + begin + n))
          << begin << " +" << n;
    }
    std::vector<float> two(2);
    EXPECT_THAT(parsed.ReadPayload(999, absl::MakeSpan(two)),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(parsed.ReadPayload(1001, {}),
                StatusIs(absl::StatusCode::kInvalidArgument));
  }
}

// The runs cover the payload's bytes exactly, in order, wherever the
// network cut it: floats straddling two or more slices come whole, and
// nothing of the header comes with them.
TEST(BulkFrameTest, PayloadRunsCoverEveryFloatOnceInOrder) {
  auto owner = std::make_shared<std::vector<float>>(1000);
  std::iota(owner->begin(), owner->end(), 0.5f);
  grpc::ByteBuffer frame = EncodeBulkFrame(Header(), *owner, owner);
  const size_t header_end = frame.Length() - owner->size() * sizeof(float);
  const std::string payload(reinterpret_cast<const char*>(owner->data()),
                            owner->size() * sizeof(float));
  for (const std::vector<size_t>& cuts : std::vector<std::vector<size_t>>{
           {},
           {header_end},
           {header_end - 1, header_end + 3, header_end + 1001},
           // One float over four slices, then one over three.
           {header_end + 1, header_end + 2, header_end + 3, header_end + 5,
            header_end + 6},
           {header_end + 2, header_end + 6, header_end + 7,
            header_end + 3999}}) {
    PushRequest header;
    ASSERT_OK_AND_ASSIGN(BulkFrame parsed,
                         BulkFrame::Parse(Resliced(frame, cuts), header));
    std::string seen;
    int runs = 0;
    parsed.ForEachPayloadRun([&](const char* bytes, size_t floats) {
      EXPECT_GT(floats, 0u);
      seen.append(bytes, floats * sizeof(float));
      ++runs;
    });
    EXPECT_EQ(seen, payload) << "cuts " << cuts.size();
    EXPECT_GE(runs, 1);
  }
  // No payload, no run.
  grpc::ByteBuffer empty = EncodeBulkFrame(Header(), {}, nullptr);
  PushRequest header;
  ASSERT_OK_AND_ASSIGN(BulkFrame parsed, BulkFrame::Parse(empty, header));
  parsed.ForEachPayloadRun(
      [](const char*, size_t) { ADD_FAILURE() << "a run of no payload"; });
}

TEST(BulkFrameTest, CopyVisitsNothingWhenTheSizesDoNotMatch) {
  std::vector<float> values(5, 1.0f);
  grpc::ByteBuffer frame = EncodeBulkFrame(Header(), values, nullptr);
  PushRequest header;
  ASSERT_OK_AND_ASSIGN(BulkFrame parsed, BulkFrame::Parse(frame, header));
  std::vector<float> out(4);
  const absl::Span<float> pieces[] = {absl::MakeSpan(out)};
  int visits = 0;
  EXPECT_THAT(
      parsed.CopyPayload(pieces, [&](absl::Span<const float>) { ++visits; }),
      StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(visits, 0);
}

TEST(BulkFrameTest, PiecesMustAddUpToThePayload) {
  std::vector<float> values(5, 1.0f);
  grpc::ByteBuffer frame = EncodeBulkFrame(Header(), values, nullptr);
  PushRequest header;
  ASSERT_OK_AND_ASSIGN(BulkFrame parsed, BulkFrame::Parse(frame, header));
  std::vector<float> a(2), b(2);
  const absl::Span<float> out[] = {absl::MakeSpan(a), absl::MakeSpan(b)};
  EXPECT_THAT(parsed.CopyPayload(out),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("payload holds 5 values but the header "
                                 "says 4")));
}

TEST(BulkFrameTest, EmptyPayloadIsFine) {
  PullRequest pull;
  pull.set_variable("w");
  grpc::ByteBuffer frame = EncodeBulkFrame(pull, {}, nullptr);
  PullRequest header;
  ASSERT_OK_AND_ASSIGN(BulkFrame parsed, BulkFrame::Parse(frame, header));
  EXPECT_EQ(header.variable(), "w");
  EXPECT_EQ(parsed.payload_bytes(), 0u);
}

TEST(BulkFrameTest, TruncatedPayloadIsRejected) {
  auto owner = std::make_shared<std::vector<float>>(5, 1.0f);
  grpc::Slice whole;
  ASSERT_TRUE(
      EncodeBulkFrame(Header(), *owner, owner).DumpToSingleSlice(&whole).ok());
  grpc::Slice cut(whole.begin(), whole.size() - 2);
  grpc::ByteBuffer truncated(&cut, 1);
  PushRequest header;
  EXPECT_THAT(BulkFrame::Parse(truncated, header),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not a whole number of float32")));
}

TEST(BulkFrameTest, PayloadSizeMustMatchTheDestination) {
  auto owner = std::make_shared<std::vector<float>>(5, 1.0f);
  grpc::ByteBuffer frame = EncodeBulkFrame(Header(), *owner, owner);
  PushRequest header;
  ASSERT_OK_AND_ASSIGN(BulkFrame parsed, BulkFrame::Parse(frame, header));
  std::vector<float> small(4), big(6);
  EXPECT_THAT(parsed.CopyPayload(absl::MakeSpan(small)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("holds 5 values but the header says 4")));
  EXPECT_THAT(parsed.CopyPayload(absl::MakeSpan(big)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(BulkFrameTest, TruncatedHeaderIsRejected) {
  grpc::Slice whole;
  auto owner = std::make_shared<std::vector<float>>(5, 1.0f);
  ASSERT_TRUE(
      EncodeBulkFrame(Header(), *owner, owner).DumpToSingleSlice(&whole).ok());
  grpc::Slice cut(whole.begin(), 6);
  grpc::ByteBuffer truncated(&cut, 1);
  PushRequest header;
  EXPECT_THAT(BulkFrame::Parse(truncated, header),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("truncated inside its")));
}

TEST(BulkFrameTest, GarbageIsRejected) {
  std::string garbage = "\xff\xff\xff\xff\x0f garbage";
  grpc::Slice slice(garbage);
  grpc::ByteBuffer buffer(&slice, 1);
  PushRequest header;
  EXPECT_THAT(BulkFrame::Parse(buffer, header),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not speaking psflow's protocol")));
  grpc::ByteBuffer empty;
  EXPECT_THAT(BulkFrame::Parse(empty, header),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace psflow
