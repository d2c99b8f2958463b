#include "ps/shared_memory_sessions.h"

#include <cstdint>
#include <limits>
#include <memory>

#include "client/shared_memory_shard.h"
#include "common/shared_memory_region.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kData = 1 << 16;
// Whom the tests' sessions belong to (the attach call's caller).
constexpr char kOwner[] = "worker-0";

// A client's region, offered to the sessions as a client on this host would.
struct Client {
  Client() : region(*SharedMemoryRegion::Create(kData)) {}
  AttachSharedMemoryRequest Offer() const { return AttachRequestFor(*region); }
  std::unique_ptr<SharedMemoryRegion> region;
};

SharedPayload Range(uint64_t session, uint64_t offset, uint64_t bytes) {
  SharedPayload payload;
  payload.set_session(session);
  payload.set_offset(offset);
  payload.set_bytes(bytes);
  return payload;
}

TEST(SharedMemorySessionsTest, ResolvedValuesAreTheClientsMemory) {
  SharedMemorySessions sessions(SharedMemorySessions::Options{});
  Client client;
  ASSERT_OK_AND_ASSIGN(uint64_t session,
                       sessions.Attach(client.Offer(), kOwner));
  EXPECT_NE(session, 0u);
  EXPECT_EQ(sessions.size(), 1);
  const uint64_t offset = kSharedMemoryHeaderBytes + 128;
  float* theirs = reinterpret_cast<float*>(client.region->base() + offset);
  theirs[0] = 1.5f;
  theirs[2] = -2.0f;
  ASSERT_OK_AND_ASSIGN(
      SharedMemorySessions::Payload payload,
      sessions.Resolve(Range(session, offset, 12), 12, kOwner));
  ASSERT_EQ(payload.values.size(), 3u);
  EXPECT_EQ(payload.values[0], 1.5f);
  EXPECT_EQ(payload.values[2], -2.0f);
  payload.values[1] = 7.0f;  // a pull's answer
  EXPECT_EQ(theirs[1], 7.0f);
  EXPECT_EQ(sessions.bytes(), 12);
}

TEST(SharedMemorySessionsTest, RangesOutsideTheRegionAreRejected) {
  SharedMemorySessions sessions(SharedMemorySessions::Options{});
  Client client;
  ASSERT_OK_AND_ASSIGN(uint64_t session,
                       sessions.Attach(client.Offer(), kOwner));
  const uint64_t total = static_cast<uint64_t>(client.region->total_bytes());
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  struct Bad {
    uint64_t offset, bytes;
    int64_t expected;
  };
  for (const Bad& bad : {
           Bad{0, 64, 64},                           // in the header
           Bad{kSharedMemoryHeaderBytes + 4, 8, 8},  // misaligned
           Bad{kSharedMemoryHeaderBytes, 8, 12},     // another size
           Bad{total - 64, 128, 128},                // runs off the end
           Bad{total + 64, 4, 4},                    // starts past the end
           Bad{max - 63, 128, 128},                  // wraps around
       }) {
    EXPECT_THAT(sessions.Resolve(Range(session, bad.offset, bad.bytes),
                                 bad.expected, kOwner),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("shared-memory range")))
        << bad.offset << " +" << bad.bytes;
  }
  // The last whole piece is fine.
  EXPECT_OK(sessions.Resolve(Range(session, total - 64, 64), 64, kOwner));
}

TEST(SharedMemorySessionsTest, UnknownAndDetachedSessionsAreLost) {
  SharedMemorySessions sessions(SharedMemorySessions::Options{});
  Client client;
  ASSERT_OK_AND_ASSIGN(uint64_t session,
                       sessions.Attach(client.Offer(), kOwner));
  absl::Status unknown =
      sessions
          .Resolve(Range(session + 1, kSharedMemoryHeaderBytes, 4), 4, kOwner)
          .status();
  EXPECT_TRUE(SharedMemorySessions::IsLostSession(unknown)) << unknown;
  // A call still using the mapping keeps it alive after the detach.
  ASSERT_OK_AND_ASSIGN(
      SharedMemorySessions::Payload held,
      sessions.Resolve(Range(session, kSharedMemoryHeaderBytes, 4), 4, kOwner));
  EXPECT_OK(sessions.Detach(session, kOwner));
  EXPECT_OK(sessions.Detach(session, kOwner));  // twice is harmless
  EXPECT_EQ(sessions.size(), 0);
  held.values[0] = 3.0f;
  EXPECT_EQ(reinterpret_cast<float*>(client.region->base() +
                                     kSharedMemoryHeaderBytes)[0],
            3.0f);
  EXPECT_TRUE(SharedMemorySessions::IsLostSession(
      sessions.Resolve(Range(session, kSharedMemoryHeaderBytes, 4), 4, kOwner)
          .status()));
  EXPECT_FALSE(SharedMemorySessions::IsLostSession(
      absl::FailedPreconditionError("not configured")));
}

// A session is its attacher's: another caller that names it (its id
// guessed or leaked) can neither read or write the region nor detach it.
TEST(SharedMemorySessionsTest, ASessionServesOnlyTheCallerThatAttachedIt) {
  SharedMemorySessions sessions(SharedMemorySessions::Options{});
  Client client;
  ASSERT_OK_AND_ASSIGN(uint64_t session,
                       sessions.Attach(client.Offer(), kOwner));
  const SharedPayload range = Range(session, kSharedMemoryHeaderBytes, 4);
  for (const char* other : {"worker-1", "evaluator-0", ""}) {
    SCOPED_TRACE(other);
    const absl::Status refused = sessions.Resolve(range, 4, other).status();
    EXPECT_THAT(refused, StatusIs(absl::StatusCode::kPermissionDenied,
                                  HasSubstr("belongs to another caller")));
    EXPECT_FALSE(SharedMemorySessions::IsLostSession(refused));
    EXPECT_THAT(sessions.Detach(session, other),
                StatusIs(absl::StatusCode::kPermissionDenied));
  }
  EXPECT_EQ(sessions.size(), 1);
  EXPECT_OK(sessions.Resolve(range, 4, kOwner));
}

TEST(SharedMemorySessionsTest, DisabledServerRefusesEveryAttach) {
  SharedMemorySessions::Options options;
  options.enabled = false;
  SharedMemorySessions sessions(options);
  Client client;
  EXPECT_THAT(sessions.Attach(client.Offer(), kOwner),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("--shared_memory=false")));
}

TEST(SharedMemorySessionsTest, RefusesAnotherProtocolAndForeignRegions) {
  SharedMemorySessions sessions(SharedMemorySessions::Options{});
  Client client;
  AttachSharedMemoryRequest request = client.Offer();
  request.set_protocol_version(kProtocolVersion + 1);
  EXPECT_THAT(
      sessions.Attach(request, kOwner),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("protocol")));
  request = client.Offer();
  request.set_token(std::string(32, '0'));
  EXPECT_THAT(sessions.Attach(request, kOwner),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(sessions.size(), 0);
}

TEST(SharedMemorySessionsTest, IdleSessionsAreForgottenAtTheNextAttach) {
  SharedMemorySessions::Options options;
  options.idle_timeout = absl::ZeroDuration();
  SharedMemorySessions sessions(options);
  Client first, second;
  ASSERT_OK_AND_ASSIGN(uint64_t old_session,
                       sessions.Attach(first.Offer(), kOwner));
  absl::SleepFor(absl::Milliseconds(2));
  ASSERT_OK(sessions.Attach(second.Offer(), kOwner));
  EXPECT_EQ(sessions.size(), 1);
  EXPECT_TRUE(SharedMemorySessions::IsLostSession(
      sessions
          .Resolve(Range(old_session, kSharedMemoryHeaderBytes, 4), 4, kOwner)
          .status()));
}

TEST(SharedMemorySessionsTest, CallsForgetSessionsOfClientsThatWentQuiet) {
  SharedMemorySessions::Options options;
  options.idle_timeout = absl::Milliseconds(200);
  SharedMemorySessions sessions(options);
  Client quiet, busy;
  ASSERT_OK_AND_ASSIGN(uint64_t quiet_session,
                       sessions.Attach(quiet.Offer(), kOwner));
  ASSERT_OK_AND_ASSIGN(uint64_t busy_session,
                       sessions.Attach(busy.Offer(), kOwner));
  // No further attach: the busy client's own calls sweep the quiet one.
  const absl::Time end = absl::Now() + absl::Seconds(20);
  while (sessions.size() == 2 && absl::Now() < end) {
    ASSERT_OK(sessions.Resolve(Range(busy_session, kSharedMemoryHeaderBytes, 4),
                               4, kOwner));
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(sessions.size(), 1);
  EXPECT_TRUE(SharedMemorySessions::IsLostSession(
      sessions
          .Resolve(Range(quiet_session, kSharedMemoryHeaderBytes, 4), 4, kOwner)
          .status()));
}

TEST(SharedMemorySessionsTest, DetachAllForgetsEverySession) {
  SharedMemorySessions sessions(SharedMemorySessions::Options{});
  Client a, b;
  ASSERT_OK(sessions.Attach(a.Offer(), kOwner));
  ASSERT_OK(sessions.Attach(b.Offer(), kOwner));
  sessions.DetachAll();
  EXPECT_EQ(sessions.size(), 0);
}

TEST(SharedMemorySessionsTest, SessionCountIsBounded) {
  SharedMemorySessions::Options options;
  options.max_sessions = 1;
  SharedMemorySessions sessions(options);
  Client first, second;
  ASSERT_OK(sessions.Attach(first.Offer(), kOwner));
  EXPECT_THAT(sessions.Attach(second.Offer(), kOwner),
              StatusIs(absl::StatusCode::kResourceExhausted));
}

}  // namespace
}  // namespace psflow
