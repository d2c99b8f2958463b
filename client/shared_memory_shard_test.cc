// The shared-memory decorator's decisions over a transport the test
// answers by hand (no gRPC, no server process): when calls use the
// region, what is resent without it, which pieces are given up, when a
// region is offered again, and that destruction waits and detaches. The
// regions are resolved by a real SharedMemorySessions, as a server would.
#include "client/shared_memory_shard.h"

#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"
#include "ps/shared_memory_sessions.h"

namespace psflow {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

class ScriptedTransport final : public SharedMemoryTransport {
 public:
  struct Pull {
    PullBatchRequest header;
    std::vector<absl::Span<float>> out;
    std::function<void(absl::StatusOr<PullBatchResponse>)> done;
  };
  struct Push {
    PushBatchRequest header;
    std::vector<std::vector<float>> values;  // the frame's payload, if any
    std::shared_ptr<const void> owner;
    std::vector<absl::Span<float>> out;  // PushThenPull's, if any
    std::function<void(absl::StatusOr<PushBatchResponse>)> done;
  };
  struct Offer {
    AttachSharedMemoryRequest request;
    std::function<void(absl::StatusOr<AttachSharedMemoryResponse>)> done;
  };
  // Sessions detached, kept by the test (the transport dies with the
  // shard).
  struct Log {
    Mutex mu;
    std::vector<uint64_t> detached ABSL_GUARDED_BY(mu);
  };

  explicit ScriptedTransport(std::shared_ptr<Log> log) : log_(std::move(log)) {}

  const std::string& name() const override { return name_; }
  absl::StatusOr<ConfigureResponse> Configure(const ConfigureRequest&,
                                              absl::Time) override {
    return absl::UnimplementedError("scripted");
  }
  absl::Status CreateVariables(const CreateVariablesRequest&,
                               absl::Time) override {
    return absl::UnimplementedError("scripted");
  }
  absl::StatusOr<StatsResponse> Stats(absl::Time) override {
    return absl::UnimplementedError("scripted");
  }
  absl::Status Shutdown(const std::string&, absl::Time) override {
    return absl::UnimplementedError("scripted");
  }
  absl::Status ExcludeWorkers(const ExcludeWorkersRequest&,
                              absl::Time) override {
    return absl::UnimplementedError("scripted");
  }
  absl::StatusOr<HoldResponse> Hold(const HoldRequest&, absl::Time) override {
    return absl::UnimplementedError("scripted");
  }
  absl::StatusOr<SaveShardResponse> SaveShard(const SaveShardRequest&,
                                              absl::Time) override {
    return absl::UnimplementedError("scripted");
  }
  absl::StatusOr<RestoreShardResponse> RestoreShard(const RestoreShardRequest&,
                                                    absl::Time) override {
    return absl::UnimplementedError("scripted");
  }
  // Rows pass through to the transport untouched; the scripted transport
  // records that they arrived.
  void PullRows(
      const PullRowsRequest& header, std::vector<absl::Span<const int64_t>>,
      std::vector<absl::Span<float>>, absl::Time,
      std::function<void(absl::StatusOr<PullRowsResponse>)> done) override {
    ++rows_calls;
    PullRowsResponse response;
    for (int i = 0; i < header.parts_size(); ++i) response.add_versions(0);
    done(response);
  }
  void PushRows(
      const PushRowsRequest& header, std::vector<absl::Span<const int64_t>>,
      std::vector<absl::Span<const float>>, std::shared_ptr<const void>,
      absl::Time,
      std::function<void(absl::StatusOr<PushRowsResponse>)> done) override {
    ++rows_calls;
    PushRowsResponse response;
    for (int i = 0; i < header.parts_size(); ++i) response.add_results();
    done(response);
  }
  int rows_calls = 0;

  void Assign(const AssignRequest&, absl::Span<const float>,
              std::shared_ptr<const void>, absl::Time,
              std::function<void(absl::Status)> done) override {
    done(absl::UnimplementedError("scripted"));
  }

  void PullBatch(
      const PullBatchRequest& header, std::vector<absl::Span<float>> out,
      absl::Time,
      std::function<void(absl::StatusOr<PullBatchResponse>)> done) override {
    MutexLock lock(&mu_);
    pulls_.push_back({header, std::move(out), std::move(done)});
  }
  void PushBatch(
      const PushBatchRequest& header, std::vector<absl::Span<const float>> data,
      std::shared_ptr<const void> owner, absl::Time,
      std::function<void(absl::StatusOr<PushBatchResponse>)> done) override {
    std::vector<std::vector<float>> values;
    for (absl::Span<const float> piece : data) {
      values.emplace_back(piece.begin(), piece.end());
    }
    MutexLock lock(&mu_);
    pushes_.push_back(
        {header, std::move(values), std::move(owner), {}, std::move(done)});
  }
  // Recorded as one push whose header keeps its then_pull.
  void PushThenPull(
      const PushBatchRequest& header, std::vector<absl::Span<const float>> data,
      std::shared_ptr<const void> owner, std::vector<absl::Span<float>> out,
      absl::Time,
      std::function<void(absl::StatusOr<PushBatchResponse>)> done) override {
    std::vector<std::vector<float>> values;
    for (absl::Span<const float> piece : data) {
      values.emplace_back(piece.begin(), piece.end());
    }
    MutexLock lock(&mu_);
    pushes_.push_back({header, std::move(values), std::move(owner),
                       std::move(out), std::move(done)});
  }
  void OfferSharedMemory(
      const AttachSharedMemoryRequest& request,
      std::function<void(absl::StatusOr<AttachSharedMemoryResponse>)> done)
      override {
    MutexLock lock(&mu_);
    offers_.push_back({request, std::move(done)});
  }
  void CancelSharedMemoryOffers() override {
    std::deque<Offer> cancelled;
    {
      MutexLock lock(&mu_);
      cancelled.swap(offers_);
    }
    for (Offer& offer : cancelled) {
      offer.done(absl::CancelledError("offer cancelled"));
    }
  }
  void DetachSharedMemory(uint64_t session, absl::Time) override {
    MutexLock lock(&log_->mu);
    log_->detached.push_back(session);
  }

  // The oldest unanswered call of each kind (they must exist).
  Pull TakePull() {
    MutexLock lock(&mu_);
    EXPECT_FALSE(pulls_.empty());
    Pull pull = std::move(pulls_.front());
    pulls_.pop_front();
    return pull;
  }
  Push TakePush() {
    MutexLock lock(&mu_);
    EXPECT_FALSE(pushes_.empty());
    Push push = std::move(pushes_.front());
    pushes_.pop_front();
    return push;
  }
  Offer TakeOffer() {
    MutexLock lock(&mu_);
    EXPECT_FALSE(offers_.empty());
    Offer offer = std::move(offers_.front());
    offers_.pop_front();
    return offer;
  }
  int pending_offers() const {
    MutexLock lock(&mu_);
    return static_cast<int>(offers_.size());
  }

 private:
  const std::string name_ = "ps-0";
  const std::shared_ptr<Log> log_;
  mutable Mutex mu_;
  std::deque<Pull> pulls_ ABSL_GUARDED_BY(mu_);
  std::deque<Push> pushes_ ABSL_GUARDED_BY(mu_);
  std::deque<Offer> offers_ ABSL_GUARDED_BY(mu_);
};

absl::Time Soon() { return absl::Now() + absl::Minutes(1); }

PullBatchRequest PullOf(const std::string& variable, int64_t n) {
  PullBatchRequest header;
  header.set_protocol_version(kProtocolVersion);
  PullRequest* part = header.add_parts();
  part->set_variable(variable);
  part->set_num_elements(n);
  return header;
}

PushBatchRequest PushOf(const std::string& variable, int64_t n) {
  PushBatchRequest header;
  header.set_protocol_version(kProtocolVersion);
  PushRequest* part = header.add_parts();
  part->set_variable(variable);
  part->set_num_elements(n);
  return header;
}

PullBatchResponse Versions(int64_t version) {
  PullBatchResponse response;
  response.add_versions(version);
  return response;
}

PushBatchResponse Applied(int64_t version) {
  PushBatchResponse response;
  response.add_results()->set_version(version);
  return response;
}

class SharedMemoryShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto transport = std::make_unique<ScriptedTransport>(log_);
    transport_ = transport.get();
    shard_ =
        std::make_unique<SharedMemoryShard>(std::move(transport), kRegionBytes);
  }

  std::vector<uint64_t> Detached() {
    MutexLock lock(&log_->mu);
    return log_->detached;
  }

  // Answers the pending offer as a server on this host would; returns the
  // session.
  uint64_t AttachAsServer() {
    ScriptedTransport::Offer offer = transport_->TakeOffer();
    absl::StatusOr<uint64_t> session =
        sessions_.Attach(offer.request, "worker-0");
    EXPECT_OK(session);
    AttachSharedMemoryResponse response;
    response.set_session(session.value_or(0));
    offer.done(response);
    EXPECT_TRUE(shard_->WaitForSharedMemory(absl::ZeroDuration()));
    return session.value_or(0);
  }

  // Three pulls of a quarter of the region each, all ended with `status`.
  void EndThreeQuarterPulls(const absl::Status& status) {
    std::vector<std::vector<float>> out(3, std::vector<float>(kQuarterFloats));
    for (int i = 0; i < 3; ++i) {
      shard_->PullBatch(PullOf("w", kQuarterFloats), {absl::MakeSpan(out[i])},
                        Soon(), [](absl::StatusOr<PullBatchResponse>) {});
      ScriptedTransport::Pull pull = transport_->TakePull();
      ASSERT_TRUE(pull.header.has_shared()) << "pull " << i;
      pull.done(status);
    }
  }

  // The values a region-backed call names, as the server sees them.
  absl::Span<float> RegionValues(const SharedPayload& shared, int64_t n) {
    absl::StatusOr<SharedMemorySessions::Payload> payload =
        sessions_.Resolve(shared, n * int64_t{sizeof(float)}, "worker-0");
    EXPECT_OK(payload);
    held_.push_back(payload->region);
    return payload->values;
  }

  static constexpr int64_t kRegionBytes = 1 << 20;
  // Floats in a pull that takes about a quarter of the region.
  static constexpr int64_t kQuarterFloats =
      kRegionBytes / 4 / sizeof(float) - 1024;
  std::shared_ptr<ScriptedTransport::Log> log_ =
      std::make_shared<ScriptedTransport::Log>();
  SharedMemorySessions sessions_{SharedMemorySessions::Options{}};
  std::vector<std::shared_ptr<SharedMemoryRegion>> held_;
  ScriptedTransport* transport_ = nullptr;  // owned by shard_
  std::unique_ptr<SharedMemoryShard> shard_;
};

TEST_F(SharedMemoryShardTest, CallsGoStraightThroughUntilTheServerAttaches) {
  std::vector<float> out(3);
  absl::StatusOr<PullBatchResponse> answer;
  shard_->PullBatch(PullOf("b", 3), {absl::MakeSpan(out)}, Soon(),
                    [&](absl::StatusOr<PullBatchResponse> r) { answer = r; });
  ScriptedTransport::Pull pull = transport_->TakePull();
  EXPECT_FALSE(pull.header.has_shared());
  ASSERT_EQ(pull.out.size(), 1);
  EXPECT_EQ(pull.out[0].data(), out.data()) << "the caller's own buffer";
  pull.done(Versions(4));
  EXPECT_THAT(answer, IsOkAndHolds(::testing::Property(
                          &PullBatchResponse::versions, ElementsAre(4))));
}

TEST_F(SharedMemoryShardTest, ARefusedOfferLeavesEveryCallOnTheTransport) {
  transport_->TakeOffer().done(
      absl::FailedPreconditionError("shared memory is disabled"));
  EXPECT_FALSE(shard_->WaitForSharedMemory(absl::ZeroDuration()));
  auto gradient = std::make_shared<std::vector<float>>(3, 1.0f);
  shard_->PushBatch(PushOf("b", 3), {*gradient}, gradient, Soon(),
                    [](absl::StatusOr<PushBatchResponse>) {});
  ScriptedTransport::Push push = transport_->TakePush();
  EXPECT_FALSE(push.header.has_shared());
  EXPECT_THAT(push.values, ElementsAre(ElementsAre(1, 1, 1)));
  push.done(Applied(1));
}

TEST_F(SharedMemoryShardTest, PushesAndPullsCarryTheirValuesInTheRegion) {
  AttachAsServer();
  auto gradient =
      std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3});
  absl::StatusOr<PushBatchResponse> pushed;
  shard_->PushBatch(PushOf("b", 3), {*gradient}, gradient, Soon(),
                    [&](absl::StatusOr<PushBatchResponse> r) { pushed = r; });
  ScriptedTransport::Push push = transport_->TakePush();
  ASSERT_TRUE(push.header.has_shared());
  EXPECT_THAT(push.values, IsEmpty()) << "the frame is only a header";
  EXPECT_THAT(RegionValues(push.header.shared(), 3), ElementsAre(1, 2, 3));
  push.done(Applied(1));
  ASSERT_OK(pushed);
  EXPECT_EQ(shard_->shared_memory_bytes_held(), 0);

  std::vector<float> out(3);
  absl::StatusOr<PullBatchResponse> pulled;
  shard_->PullBatch(PullOf("b", 3), {absl::MakeSpan(out)}, Soon(),
                    [&](absl::StatusOr<PullBatchResponse> r) { pulled = r; });
  ScriptedTransport::Pull pull = transport_->TakePull();
  ASSERT_TRUE(pull.header.has_shared());
  EXPECT_THAT(pull.out, IsEmpty());
  absl::Span<float> region = RegionValues(pull.header.shared(), 3);
  region[0] = 7;
  region[1] = 8;
  region[2] = 9;
  pull.done(Versions(1));
  ASSERT_OK(pulled);
  EXPECT_THAT(out, ElementsAre(7, 8, 9));
  EXPECT_EQ(shard_->shared_memory_bytes_held(), 0);
}

TEST_F(SharedMemoryShardTest,
       ALostSessionIsResentWithoutTheRegionAndReoffered) {
  AttachAsServer();
  auto gradient =
      std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3});
  int answers = 0;
  absl::StatusOr<PushBatchResponse> pushed;
  shard_->PushBatch(PushOf("b", 3), {*gradient}, gradient, Soon(),
                    [&](absl::StatusOr<PushBatchResponse> r) {
                      ++answers;
                      pushed = r;
                    });
  ScriptedTransport::Push first = transport_->TakePush();
  first.done(MarkSharedMemoryLost(
      absl::FailedPreconditionError("unknown shared-memory session")));
  EXPECT_EQ(answers, 0) << "resent, not answered";
  ScriptedTransport::Push resent = transport_->TakePush();
  EXPECT_FALSE(resent.header.has_shared());
  EXPECT_THAT(resent.values, ElementsAre(ElementsAre(1, 2, 3)));
  EXPECT_EQ(transport_->pending_offers(), 1) << "the region offered again";
  resent.done(Applied(1));
  EXPECT_EQ(answers, 1);
  ASSERT_OK(pushed);
  // The resend's frame held the piece; it is free again.
  resent.owner.reset();
  EXPECT_EQ(shard_->shared_memory_bytes_held(), 0);
}

TEST_F(SharedMemoryShardTest, AnUnavailablePullIsResentAndItsPieceGivenUp) {
  AttachAsServer();
  std::vector<float> out(3);
  absl::StatusOr<PullBatchResponse> pulled;
  shard_->PullBatch(PullOf("b", 3), {absl::MakeSpan(out)}, Soon(),
                    [&](absl::StatusOr<PullBatchResponse> r) { pulled = r; });
  transport_->TakePull().done(absl::UnavailableError("connection reset"));
  ScriptedTransport::Pull resent = transport_->TakePull();
  EXPECT_FALSE(resent.header.has_shared());
  ASSERT_EQ(resent.out.size(), 1);
  EXPECT_EQ(resent.out[0].data(), out.data());
  // The first attempt may still reach the server and fill its piece.
  EXPECT_GT(shard_->shared_memory_bytes_held(), 0);
  resent.out[0][0] = 5;
  resent.done(Versions(2));
  ASSERT_OK(pulled);
  EXPECT_EQ(out[0], 5);
}

TEST_F(SharedMemoryShardTest, ATimedOutPushFailsAndGivesUpItsPiece) {
  AttachAsServer();
  auto gradient = std::make_shared<std::vector<float>>(3, 1.0f);
  absl::StatusOr<PushBatchResponse> pushed;
  shard_->PushBatch(PushOf("b", 3), {*gradient}, gradient, Soon(),
                    [&](absl::StatusOr<PushBatchResponse> r) { pushed = r; });
  transport_->TakePush().done(absl::DeadlineExceededError("too slow"));
  EXPECT_THAT(pushed, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_GT(shard_->shared_memory_bytes_held(), 0);
  // A refusal the server gave (nothing in flight) frees its piece.
  shard_->PushBatch(PushOf("b", 3), {*gradient}, gradient, Soon(),
                    [&](absl::StatusOr<PushBatchResponse> r) { pushed = r; });
  const int64_t before = shard_->shared_memory_bytes_held();
  transport_->TakePush().done(absl::InvalidArgumentError("NaN"));
  EXPECT_THAT(pushed, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_LT(shard_->shared_memory_bytes_held(), before);
}

TEST_F(SharedMemoryShardTest, GivingUpHalfTheRegionOffersAFreshOne) {
  AttachAsServer();
  std::shared_ptr<SharedBuffer> tensors = shard_->AllocateShared(16);
  ASSERT_NE(tensors, nullptr);
  // Each pull takes a quarter of the region; three time out.
  ASSERT_NO_FATAL_FAILURE(
      EndThreeQuarterPulls(absl::DeadlineExceededError("too slow")));
  EXPECT_EQ(transport_->pending_offers(), 1) << "a fresh region";
  // Memory of the old region is no longer carried in place: its owner is
  // told to take fresh memory.
  EXPECT_TRUE(tensors->retired());
  AttachAsServer();
  EXPECT_EQ(shard_->shared_memory_bytes_held(), 0) << "the new region";
  std::shared_ptr<SharedBuffer> fresh = shard_->AllocateShared(16);
  ASSERT_NE(fresh, nullptr);
  EXPECT_FALSE(fresh->retired());
}

// Once the job is over (Close), calls end cancelled: their memory is still
// kept from reuse, but no fresh region is offered for it.
TEST_F(SharedMemoryShardTest, AfterCloseCancelledCallsOfferNoFreshRegion) {
  AttachAsServer();
  shard_->Close();
  ASSERT_NO_FATAL_FAILURE(EndThreeQuarterPulls(absl::CancelledError("closed")));
  EXPECT_EQ(transport_->pending_offers(), 0) << "no fresh region";
  EXPECT_GE(shard_->shared_memory_bytes_held(),
            3 * kQuarterFloats * static_cast<int64_t>(sizeof(float)))
      << "the pieces stay out of use";
}

// A worker's tensors in memory from AllocateShared: the server reads and
// writes that memory itself, and nothing is copied on the client.
TEST_F(SharedMemoryShardTest, TensorsInSharedMemoryTravelWithoutACopy) {
  AttachAsServer();
  std::shared_ptr<SharedBuffer> gradient = shard_->AllocateShared(3);
  std::shared_ptr<SharedBuffer> values = shard_->AllocateShared(3);
  ASSERT_NE(gradient, nullptr);
  ASSERT_NE(values, nullptr);
  EXPECT_THAT(gradient->span(), ElementsAre(0, 0, 0)) << "zero-filled";
  gradient->span()[0] = 1;
  gradient->span()[1] = 2;
  gradient->span()[2] = 3;

  absl::StatusOr<PushBatchResponse> pushed;
  shard_->PushBatch(PushOf("b", 3), {gradient->span()}, nullptr, Soon(),
                    [&](absl::StatusOr<PushBatchResponse> r) { pushed = r; });
  ScriptedTransport::Push push = transport_->TakePush();
  ASSERT_TRUE(push.header.has_shared());
  EXPECT_THAT(push.values, IsEmpty());
  absl::Span<float> seen = RegionValues(push.header.shared(), 3);
  EXPECT_THAT(seen, ElementsAre(1, 2, 3));
  gradient->span()[0] = 4;  // the same memory, not a copy
  EXPECT_EQ(seen[0], 4);
  push.done(Applied(1));
  ASSERT_OK(pushed);

  absl::StatusOr<PullBatchResponse> pulled;
  shard_->PullBatch(PullOf("b", 3), {values->span()}, Soon(),
                    [&](absl::StatusOr<PullBatchResponse> r) { pulled = r; });
  ScriptedTransport::Pull pull = transport_->TakePull();
  ASSERT_TRUE(pull.header.has_shared());
  absl::Span<float> written = RegionValues(pull.header.shared(), 3);
  written[0] = 7;
  EXPECT_EQ(values->span()[0], 7) << "written in place, before the answer";
  pull.done(Versions(1));
  ASSERT_OK(pulled);

  EXPECT_EQ(shard_->bytes_copied(), 0);
  EXPECT_EQ(shard_->bytes_in_place(), 2 * 3 * 4);
  EXPECT_FALSE(gradient->retired());
}

TEST_F(SharedMemoryShardTest, PushThenPullInPlaceNamesBothRuns) {
  AttachAsServer();
  std::shared_ptr<SharedBuffer> gradient = shard_->AllocateShared(3);
  std::shared_ptr<SharedBuffer> values = shard_->AllocateShared(3);
  gradient->span()[2] = 5;
  PushBatchRequest header = PushOf("b", 3);
  *header.mutable_then_pull() = PullOf("b", 3);
  absl::StatusOr<PushBatchResponse> answer;
  shard_->PushThenPull(
      header, {gradient->span()}, nullptr, {values->span()}, Soon(),
      [&](absl::StatusOr<PushBatchResponse> r) { answer = r; });
  ScriptedTransport::Push push = transport_->TakePush();
  ASSERT_TRUE(push.header.has_shared());
  ASSERT_TRUE(push.header.then_pull().has_shared());
  EXPECT_THAT(RegionValues(push.header.shared(), 3), ElementsAre(0, 0, 5));
  RegionValues(push.header.then_pull().shared(), 3)[1] = 6;
  EXPECT_THAT(values->span(), ElementsAre(0, 6, 0));
  PushBatchResponse response = Applied(1);
  response.mutable_pulled()->add_versions(1);
  push.done(response);
  ASSERT_OK(answer);
  EXPECT_EQ(shard_->bytes_copied(), 0);
}

TEST_F(SharedMemoryShardTest, BuffersThatAreNotOneRunTakeAPiece) {
  AttachAsServer();
  // Two allocations are not adjacent (each starts 64-byte aligned), and
  // ordinary memory is not the region's: both calls copy.
  std::shared_ptr<SharedBuffer> a = shard_->AllocateShared(1);
  std::shared_ptr<SharedBuffer> b = shard_->AllocateShared(1);
  PushBatchRequest header = PushOf("a", 1);
  PushRequest* part = header.add_parts();
  part->set_variable("b");
  part->set_num_elements(1);
  shard_->PushBatch(header, {a->span(), b->span()}, nullptr, Soon(),
                    [](absl::StatusOr<PushBatchResponse>) {});
  transport_->TakePush().done(Applied(1));
  std::vector<float> heap(3);
  shard_->PullBatch(PullOf("b", 3), {absl::MakeSpan(heap)}, Soon(),
                    [](absl::StatusOr<PullBatchResponse>) {});
  transport_->TakePull().done(Versions(1));
  EXPECT_EQ(shard_->bytes_in_place(), 0);
  EXPECT_EQ(shard_->bytes_copied(), 2 * 4 + 3 * 4);
}

TEST_F(SharedMemoryShardTest,
       AnInPlaceCallThatMayStillBeServedRetiresItsMemory) {
  AttachAsServer();
  std::shared_ptr<SharedBuffer> values = shard_->AllocateShared(3);
  absl::StatusOr<PullBatchResponse> pulled;
  shard_->PullBatch(PullOf("b", 3), {values->span()}, Soon(),
                    [&](absl::StatusOr<PullBatchResponse> r) { pulled = r; });
  // Unavailable is not resent here: the first attempt may still write the
  // caller's own memory, which the caller must leave first.
  transport_->TakePull().done(absl::UnavailableError("connection reset"));
  EXPECT_THAT(pulled, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_TRUE(values->retired());
  // Used again anyway, it takes a piece (a copy), never the retired memory.
  shard_->PullBatch(PullOf("b", 3), {values->span()}, Soon(),
                    [&](absl::StatusOr<PullBatchResponse> r) { pulled = r; });
  ScriptedTransport::Pull pull = transport_->TakePull();
  ASSERT_TRUE(pull.header.has_shared());
  RegionValues(pull.header.shared(), 3)[0] = 9;
  EXPECT_EQ(values->span()[0], 0) << "a separate piece";
  pull.done(Versions(2));
  ASSERT_OK(pulled);
  EXPECT_EQ(values->span()[0], 9);
  // Dropped, the retired memory never returns to the free list.
  const int64_t held = shard_->shared_memory_bytes_held();
  values.reset();
  EXPECT_EQ(shard_->shared_memory_bytes_held(), held);
  // An answer the server gave (nothing in flight) leaves memory in use.
  std::shared_ptr<SharedBuffer> gradient = shard_->AllocateShared(3);
  shard_->PushBatch(PushOf("b", 3), {gradient->span()}, nullptr, Soon(),
                    [](absl::StatusOr<PushBatchResponse>) {});
  transport_->TakePush().done(absl::InvalidArgumentError("NaN"));
  EXPECT_FALSE(gradient->retired());
}

TEST_F(SharedMemoryShardTest,
       ALostSessionResendsInPlaceCallsFromTheSameMemory) {
  AttachAsServer();
  std::shared_ptr<SharedBuffer> gradient = shard_->AllocateShared(3);
  std::shared_ptr<SharedBuffer> values = shard_->AllocateShared(3);
  gradient->span()[1] = 2;
  absl::StatusOr<PushBatchResponse> pushed;
  shard_->PushBatch(PushOf("b", 3), {gradient->span()}, nullptr, Soon(),
                    [&](absl::StatusOr<PushBatchResponse> r) { pushed = r; });
  transport_->TakePush().done(MarkSharedMemoryLost(
      absl::FailedPreconditionError("unknown shared-memory session")));
  ScriptedTransport::Push resent = transport_->TakePush();
  EXPECT_FALSE(resent.header.has_shared());
  EXPECT_THAT(resent.values, ElementsAre(ElementsAre(0, 2, 0)));
  resent.done(Applied(1));
  ASSERT_OK(pushed);

  // Offered again; until the server answers, calls go over the transport
  // straight into the caller's memory.
  absl::StatusOr<PullBatchResponse> pulled;
  shard_->PullBatch(PullOf("b", 3), {values->span()}, Soon(),
                    [&](absl::StatusOr<PullBatchResponse> r) { pulled = r; });
  ScriptedTransport::Pull pull = transport_->TakePull();
  EXPECT_FALSE(pull.header.has_shared());
  ASSERT_EQ(pull.out.size(), 1);
  EXPECT_EQ(pull.out[0].data(), values->span().data());
  pull.done(Versions(1));
  ASSERT_OK(pulled);
  EXPECT_FALSE(gradient->retired());
  EXPECT_FALSE(values->retired());

  // Attached again: in place once more, in the same memory.
  AttachAsServer();
  shard_->PullBatch(PullOf("b", 3), {values->span()}, Soon(),
                    [&](absl::StatusOr<PullBatchResponse> r) { pulled = r; });
  pull = transport_->TakePull();
  ASSERT_TRUE(pull.header.has_shared());
  RegionValues(pull.header.shared(), 3)[2] = 8;
  EXPECT_EQ(values->span()[2], 8);
  pull.done(Versions(2));
  ASSERT_OK(pulled);
}

TEST_F(SharedMemoryShardTest, TheFirstAllocationWaitsForTheOffersAnswer) {
  std::thread server([this] { AttachAsServer(); });
  std::shared_ptr<SharedBuffer> buffer = shard_->AllocateShared(3);
  server.join();
  EXPECT_NE(buffer, nullptr);

  // A later offer (the server forgot the session) leaves allocations to
  // ordinary memory until it is answered.
  shard_->PushBatch(PushOf("b", 3), {buffer->span()}, nullptr, Soon(),
                    [](absl::StatusOr<PushBatchResponse>) {});
  transport_->TakePush().done(MarkSharedMemoryLost(
      absl::FailedPreconditionError("unknown shared-memory session")));
  transport_->TakePush().done(Applied(1));  // the resend
  EXPECT_EQ(shard_->AllocateShared(3), nullptr);
  AttachAsServer();
  EXPECT_NE(shard_->AllocateShared(3), nullptr);
}

TEST_F(SharedMemoryShardTest, NoSharedMemoryBeforeTheServerAttaches) {
  transport_->TakeOffer().done(
      absl::FailedPreconditionError("shared memory is disabled"));
  EXPECT_EQ(shard_->AllocateShared(3), nullptr);
}

TEST_F(SharedMemoryShardTest, DestructionWaitsForCallsThenDetaches) {
  const uint64_t session = AttachAsServer();
  auto gradient = std::make_shared<std::vector<float>>(3, 1.0f);
  absl::StatusOr<PushBatchResponse> pushed;
  shard_->PushBatch(PushOf("b", 3), {*gradient}, gradient, Soon(),
                    [&](absl::StatusOr<PushBatchResponse> r) { pushed = r; });
  ScriptedTransport::Push push = transport_->TakePush();
  Notification destroyed;
  std::thread destroy([&] {
    shard_.reset();
    destroyed.Notify();
  });
  // The push's answer runs the decorator's callback: the shard must still
  // be there (ASan would catch it otherwise), and only then go.
  push.done(Applied(1));
  destroyed.WaitForNotification();
  destroy.join();
  ASSERT_OK(pushed);
  EXPECT_THAT(Detached(), ElementsAre(session));
}

TEST_F(SharedMemoryShardTest,
       DestructionCancelsAPendingOfferAndDetachesNothing) {
  shard_.reset();  // the offer was never answered: cancelled, not awaited
  EXPECT_THAT(Detached(), IsEmpty());
}

}  // namespace
}  // namespace psflow
