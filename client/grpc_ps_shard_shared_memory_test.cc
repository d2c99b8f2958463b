// The same-host shared-memory data plane (SharedMemoryShard over GrpcPsShard)
// against a real server on 127.0.0.1: that values really bypass TCP, and what
// happens when the server refuses, forgets the session, or the region is full.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "client/grpc_ps_shard.h"
#include "client/ps_shard_test_util.h"
#include "client/shared_memory_shard.h"
#include "common/mutex.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"
#include "ps/grpc_ps_server.h"

namespace psflow {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;

constexpr int64_t kChunk = 256;  // elements: 1 KiB chunks

absl::Time Soon() { return absl::Now() + absl::Seconds(20); }

class SharedMemoryTest : public ::testing::Test {
 protected:
  // SGD with learning rate 1: after one push of g, a variable holds -g.
  void StartServer(const SharedMemorySessions::Options& shared_memory) {
    GrpcParameterServer::Options options;
    options.listen_address = "127.0.0.1:0";
    options.core.chunk_bytes = kChunk * sizeof(float);
    options.grace = absl::Milliseconds(200);
    options.shared_memory = shared_memory;
    server_ = *GrpcParameterServer::Start(options);
    ConfigureRequest config;
    config.set_protocol_version(kProtocolVersion);
    config.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
    config.mutable_learning_rate()->set_learning_rate(1.0);
    config.set_mode(ASYNC);
    config.set_num_workers(1);
    ASSERT_OK(server_->core().Configure(config));
    CreateVariablesRequest create;
    create.set_protocol_version(kProtocolVersion);
    VariableSpec* spec = create.add_variables();
    spec->set_name("w");
    spec->add_shape(2 * kChunk);
    spec = create.add_variables();
    spec->set_name("b");
    spec->add_shape(3);
    EmbeddingTableSpec* table = create.add_tables();
    table->set_name("emb");
    table->set_dim(2);
    table->mutable_initializer()->set_kind(RowInitializerConfig::ZEROS);
    ASSERT_OK(server_->core().CreateVariables(create));
  }

  // Pushes rows 7 and -3 of "emb" (gradients {1, 2} and {3, 4}), then
  // pulls rows 7, 5 and -3, expecting what SGD made of them.
  static void PushAndPullRows(PsShard& shard) {
    ASSERT_OK(
        testing::PushRowsOne(shard, "emb", {7, -3}, {1, 2, 3, 4}, Soon()));
    std::vector<float> rows(6, 9.0f);
    ASSERT_OK_AND_ASSIGN(PullRowsResponse pulled,
                         testing::PullRowsOne(shard, "emb", {7, 5, -3},
                                              absl::MakeSpan(rows), Soon()));
    EXPECT_THAT(pulled.versions(), ElementsAre(1));
    EXPECT_THAT(rows, ElementsAre(-1, -2, 0, 0, -3, -4));
  }

  // The decorator over the gRPC transport, as clients connect.
  std::unique_ptr<SharedMemoryShard> Connect(int64_t shared_memory_bytes) {
    return std::make_unique<SharedMemoryShard>(
        std::make_unique<GrpcPsShard>(
            absl::StrCat("127.0.0.1:", server_->port()), "ps-0",
            GrpcPsShard::Options()),
        shared_memory_bytes);
  }

  static absl::StatusOr<PullResponse> Pull(PsShard& shard, int64_t offset,
                                           std::vector<float>& out,
                                           int64_t min_version = 0,
                                           absl::Time deadline = Soon()) {
    return testing::PullOne(shard, "w", offset, absl::MakeSpan(out),
                            min_version, deadline);
  }

  // A whole chunk of w, all `value`.
  static absl::StatusOr<PushResponse> Push(PsShard& shard, int64_t offset,
                                           float value) {
    return testing::PushOne(
        shard, "w", offset,
        std::make_shared<const std::vector<float>>(kChunk, value), Soon());
  }

  // Pushes b's gradient {1, 2, 3} and w's second chunk's (all `w_value`)
  // as one batch.
  static absl::StatusOr<PushBatchResponse> PushBatch(PsShard& shard,
                                                     float w_value) {
    PushBatchRequest header;
    header.set_protocol_version(kProtocolVersion);
    PushRequest* part = header.add_parts();
    part->set_variable("b");
    part->set_num_elements(3);
    part = header.add_parts();
    part->set_variable("w");
    part->set_offset_elements(kChunk);
    part->set_num_elements(kChunk);
    auto b = std::make_shared<std::vector<float>>(
        std::vector<float>{1.0f, 2.0f, 3.0f});
    std::vector<float> w(kChunk, w_value);
    Notification done;
    absl::StatusOr<PushBatchResponse> result;
    shard.PushBatch(header, {*b, w}, b, Soon(),
                    [&](absl::StatusOr<PushBatchResponse> r) {
                      result = std::move(r);
                      done.Notify();
                    });
    done.WaitForNotification();
    return result;
  }

  // As PushBatch, and in the same call reads b and w's second chunk
  // after the push into `b` and `w`.
  static absl::StatusOr<PushBatchResponse> PushThenPull(PsShard& shard,
                                                        float w_value,
                                                        std::vector<float>& b,
                                                        std::vector<float>& w) {
    const std::vector<float> b_gradient = {1.0f, 2.0f, 3.0f};
    const std::vector<float> w_gradient(kChunk, w_value);
    return PushThenPullSpans(shard, {b_gradient, w_gradient},
                             {absl::MakeSpan(b), absl::MakeSpan(w)});
  }

  // PushThenPull's batch (b, then w's second chunk) from and into the
  // caller's spans.
  static absl::StatusOr<PushBatchResponse> PushThenPullSpans(
      PsShard& shard, std::vector<absl::Span<const float>> gradients,
      std::vector<absl::Span<float>> out) {
    PushBatchRequest header;
    header.set_protocol_version(kProtocolVersion);
    PullBatchRequest* pull = header.mutable_then_pull();
    pull->set_protocol_version(kProtocolVersion);
    for (auto [variable, offset, n] :
         {std::tuple<const char*, int64_t, int64_t>{"b", 0, 3},
          std::tuple<const char*, int64_t, int64_t>{"w", kChunk, kChunk}}) {
      PushRequest* part = header.add_parts();
      part->set_variable(variable);
      part->set_offset_elements(offset);
      part->set_num_elements(n);
      PullRequest* read = pull->add_parts();
      read->set_variable(variable);
      read->set_offset_elements(offset);
      read->set_num_elements(n);
    }
    Notification done;
    absl::StatusOr<PushBatchResponse> result;
    shard.PushThenPull(header, std::move(gradients), nullptr, std::move(out),
                       Soon(), [&](absl::StatusOr<PushBatchResponse> r) {
                         result = std::move(r);
                         done.Notify();
                       });
    done.WaitForNotification();
    return result;
  }

  std::vector<float> Values(const std::string& name) {
    absl::StatusOr<std::vector<Variable*>> variables =
        server_->core().ListVariables();
    for (Variable* variable : *variables) {
      if (variable->name() == name) {
        std::vector<float> values(variable->num_elements());
        ParameterServerCore& core = server_->core();
        for (int64_t offset = 0; offset < variable->num_elements();
             offset += kChunk) {
          const int64_t n = std::min(kChunk, variable->num_elements() - offset);
          ChunkRef ref = *core.Resolve(kProtocolVersion, name, offset, n);
          core.Pull(ref, absl::MakeSpan(values).subspan(offset, n));
        }
        return values;
      }
    }
    return {};
  }

  std::unique_ptr<GrpcParameterServer> server_;
};

TEST_F(SharedMemoryTest, ValuesTravelThroughSharedMemoryNotTcp) {
  StartServer(SharedMemorySessions::Options{});
  std::unique_ptr<SharedMemoryShard> shard = Connect(1 << 20);
  ASSERT_TRUE(shard->WaitForSharedMemory(absl::Seconds(20)));
  const StatsResponse before = server_->Stats();
  EXPECT_EQ(before.shared_memory_sessions(), 1);
  EXPECT_EQ(before.shared_memory_rings(), 1);
  EXPECT_TRUE(shard->ring_in_use());

  ASSERT_OK_AND_ASSIGN(PushResponse pushed, Push(*shard, 0, 2.0f));
  EXPECT_EQ(pushed.version(), 1);
  ASSERT_OK(PushBatch(*shard, 4.0f));
  std::vector<float> w(kChunk);
  ASSERT_OK_AND_ASSIGN(PullResponse pulled, Pull(*shard, 0, w));
  EXPECT_EQ(pulled.version(), 1);
  EXPECT_THAT(w, Each(-2.0f));
  ASSERT_OK(Pull(*shard, kChunk, w));
  EXPECT_THAT(w, Each(-4.0f));
  EXPECT_THAT(Values("b"), ElementsAre(-1.0f, -2.0f, -3.0f));

  const StatsResponse after = server_->Stats();
  const int64_t tensor_bytes = (kChunk + kChunk + 3 + kChunk + kChunk) * 4;
  EXPECT_EQ(after.shared_memory_bytes() - before.shared_memory_bytes(),
            tensor_bytes);
  // Only headers crossed TCP: far fewer bytes than the tensors.
  EXPECT_LT(after.bytes_received() + after.bytes_sent() -
                before.bytes_received() - before.bytes_sent(),
            tensor_bytes / 4);

  // Each call's header went through the call ring, not a gRPC call.
  EXPECT_EQ(
      after.shared_memory_ring_calls() - before.shared_memory_ring_calls(), 4);
  EXPECT_EQ(shard->ring_calls(), 4);

  EXPECT_EQ(shard->shared_memory_bytes_held(), 0);  // all returned
  shard.reset();                                    // detaches
  EXPECT_EQ(server_->Stats().shared_memory_sessions(), 0);
  EXPECT_EQ(server_->Stats().shared_memory_rings(), 0);
}

TEST_F(SharedMemoryTest, RowsTravelThroughSharedMemoryAndTheRing) {
  StartServer(SharedMemorySessions::Options{});
  std::unique_ptr<SharedMemoryShard> shard = Connect(1 << 20);
  ASSERT_TRUE(shard->WaitForSharedMemory(absl::Seconds(20)));
  ASSERT_TRUE(shard->ring_in_use());
  const StatsResponse before = server_->Stats();
  PushAndPullRows(*shard);
  const StatsResponse after = server_->Stats();
  // The push's 2 ids (a 64-byte line) and 4 floats, the pull's 3 ids and
  // 6 floats.
  EXPECT_EQ(after.shared_memory_bytes() - before.shared_memory_bytes(),
            64 + 4 * 4 + 64 + 6 * 4);
  EXPECT_EQ(
      after.shared_memory_ring_calls() - before.shared_memory_ring_calls(), 2);
  EXPECT_EQ(shard->ring_calls(), 2);
  EXPECT_EQ(shard->shared_memory_bytes_held(), 0);
}

TEST_F(SharedMemoryTest, RowsInSharedMemoryAreCheckedAsOverTcp) {
  StartServer(SharedMemorySessions::Options{});
  std::unique_ptr<SharedMemoryShard> shard = Connect(1 << 20);
  ASSERT_TRUE(shard->WaitForSharedMemory(absl::Seconds(20)));
  EXPECT_THAT(testing::PushRowsOne(*shard, "emb", {1, 2},
                                   {1, 1, 1, std::nanf("")}, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::HasSubstr("not finite")));
  // Two ids of dimension 2 take 4 floats: the piece for 3 does not match.
  EXPECT_THAT(testing::PushRowsOne(*shard, "emb", {1, 2}, {1, 1, 1}, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::HasSubstr("take 80")));
  EXPECT_THAT(testing::PushRowsOne(*shard, "nope", {1}, {1, 1}, Soon()),
              StatusIs(absl::StatusCode::kNotFound));
  std::vector<float> rows(4, 9.0f);
  ASSERT_OK(testing::PullRowsOne(*shard, "emb", {1, 2}, absl::MakeSpan(rows),
                                 Soon()));
  EXPECT_THAT(rows, Each(0.0f));
  EXPECT_EQ(shard->shared_memory_bytes_held(), 0);
}

// A rows request over gRPC may name shared memory too (a call the ring
// did not take); its payload then must be empty.
TEST_F(SharedMemoryTest, RowsNamingSharedMemoryOverGrpcCarryNoPayload) {
  StartServer(SharedMemorySessions::Options{});
  GrpcPsShard tcp(absl::StrCat("127.0.0.1:", server_->port()), "ps-0",
                  GrpcPsShard::Options());
  std::vector<float> rows(2);
  EXPECT_THAT(
      testing::PullRowsOne(tcp, "emb", {1}, absl::MakeSpan(rows), Soon(),
                           [](PullRowsRequest& header) {
                             header.mutable_shared()->set_session(1);
                           }),
      StatusIs(absl::StatusCode::kInvalidArgument,
               ::testing::HasSubstr("also carries a payload")));
  EXPECT_THAT(testing::PushRowsOne(tcp, "emb", {1}, {1, 1}, Soon(),
                                   [](PushRowsRequest& header) {
                                     header.mutable_shared()->set_session(1);
                                   }),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::HasSubstr("also carries a payload")));
}

TEST_F(SharedMemoryTest, AServerWithoutRingsTakesTheSameCallsOverGrpc) {
  SharedMemorySessions::Options no_rings;
  no_rings.max_rings = 0;  // ps_server --shared_memory_ring=false
  StartServer(no_rings);
  std::unique_ptr<SharedMemoryShard> shard = Connect(1 << 20);
  ASSERT_TRUE(shard->WaitForSharedMemory(absl::Seconds(20)));
  EXPECT_FALSE(shard->ring_in_use());
  const StatsResponse before = server_->Stats();
  ASSERT_OK(Push(*shard, 0, 2.0f));
  std::vector<float> w(kChunk);
  ASSERT_OK(Pull(*shard, 0, w));
  EXPECT_THAT(w, Each(-2.0f));
  PushAndPullRows(*shard);
  const StatsResponse after = server_->Stats();
  EXPECT_EQ(after.shared_memory_bytes() - before.shared_memory_bytes(),
            2 * kChunk * 4 + 64 + 4 * 4 + 64 + 6 * 4);
  EXPECT_EQ(after.shared_memory_rings(), 0);
  EXPECT_EQ(after.shared_memory_ring_calls(), 0);
  // The ring's memory went back to the region.
  EXPECT_EQ(shard->shared_memory_bytes_held(), 0);
}

TEST_F(SharedMemoryTest, AStoppingServerClosesItsRings) {
  StartServer(SharedMemorySessions::Options{});
  std::unique_ptr<SharedMemoryShard> shard = Connect(1 << 20);
  ASSERT_TRUE(shard->WaitForSharedMemory(absl::Seconds(20)));
  ASSERT_TRUE(shard->ring_in_use());
  ASSERT_OK(Push(*shard, 0, 2.0f));
  // The server goes: it closes its rings once drained, and the shard,
  // seeing its ring closed, sends no more calls into it (they would wait
  // for a server that is gone).
  server_->RequestShutdown("test");
  server_->Wait();
  while (shard->ring_in_use()) absl::SleepFor(absl::Milliseconds(5));
}

TEST_F(SharedMemoryTest, PushThenPullTravelsThroughSharedMemory) {
  StartServer(SharedMemorySessions::Options{});
  std::unique_ptr<SharedMemoryShard> shard = Connect(1 << 20);
  ASSERT_TRUE(shard->WaitForSharedMemory(absl::Seconds(20)));
  const StatsResponse before = server_->Stats();

  std::vector<float> b(3, 9.0f), w(kChunk, 9.0f);
  ASSERT_OK_AND_ASSIGN(PushBatchResponse response,
                       PushThenPull(*shard, 4.0f, b, w));
  EXPECT_THAT(response.pulled().versions(), ElementsAre(1, 1));
  EXPECT_THAT(b, ElementsAre(-1.0f, -2.0f, -3.0f));
  EXPECT_THAT(w, Each(-4.0f));

  const StatsResponse after = server_->Stats();
  const int64_t tensor_bytes = 2 * (3 + kChunk) * 4;  // there and back
  EXPECT_EQ(after.shared_memory_bytes() - before.shared_memory_bytes(),
            tensor_bytes);
  EXPECT_EQ(after.pushes() - before.pushes(), 2);
  EXPECT_EQ(after.pulls() - before.pulls(), 2);
  EXPECT_EQ(shard->shared_memory_bytes_held(), 0);

  // A server that forgot the session refuses before applying: the call is
  // resent once over TCP, and the region offered again.
  server_->shared_memory().DetachAll();
  ASSERT_OK_AND_ASSIGN(response, PushThenPull(*shard, 4.0f, b, w));
  EXPECT_THAT(response.pulled().versions(), ElementsAre(2, 2));
  EXPECT_THAT(b, ElementsAre(-2.0f, -4.0f, -6.0f));
  EXPECT_THAT(w, Each(-8.0f));
  ASSERT_TRUE(shard->WaitForSharedMemory(absl::Seconds(20)));
  EXPECT_EQ(shard->shared_memory_bytes_held(), 0);
}

// A worker's tensors in memory from AllocateShared, laid out as its batch
// (b, then w's second chunk): the server applies the gradients from that
// memory and writes the values into it; the client copies nothing.
TEST_F(SharedMemoryTest, TensorsInSharedMemoryAreReadAndWrittenInPlace) {
  StartServer(SharedMemorySessions::Options{});
  std::unique_ptr<SharedMemoryShard> shard = Connect(1 << 20);
  ASSERT_TRUE(shard->WaitForSharedMemory(absl::Seconds(20)));
  std::shared_ptr<SharedBuffer> gradients = shard->AllocateShared(3 + kChunk);
  std::shared_ptr<SharedBuffer> values = shard->AllocateShared(3 + kChunk);
  ASSERT_NE(gradients, nullptr);
  ASSERT_NE(values, nullptr);
  absl::Span<float> g = gradients->span();
  g[0] = 1.0f;
  g[1] = 2.0f;
  g[2] = 3.0f;
  std::fill(g.begin() + 3, g.end(), 4.0f);
  const StatsResponse before = server_->Stats();

  ASSERT_OK_AND_ASSIGN(
      PushBatchResponse response,
      PushThenPullSpans(
          *shard, {g.subspan(0, 3), g.subspan(3)},
          {values->span().subspan(0, 3), values->span().subspan(3)}));
  EXPECT_THAT(response.pulled().versions(), ElementsAre(1, 1));
  EXPECT_THAT(values->span().subspan(0, 3), ElementsAre(-1.0f, -2.0f, -3.0f));
  EXPECT_THAT(values->span().subspan(3), Each(-4.0f));
  EXPECT_EQ(shard->bytes_copied(), 0);
  EXPECT_EQ(shard->bytes_in_place(), 2 * (3 + kChunk) * 4);
  const StatsResponse after = server_->Stats();
  EXPECT_EQ(after.shared_memory_bytes() - before.shared_memory_bytes(),
            2 * (3 + kChunk) * 4);

  // A server that forgot the session: resent over TCP from and into the
  // same memory, and in place again once the region is attached again.
  server_->shared_memory().DetachAll();
  ASSERT_OK_AND_ASSIGN(
      response, PushThenPullSpans(
                    *shard, {g.subspan(0, 3), g.subspan(3)},
                    {values->span().subspan(0, 3), values->span().subspan(3)}));
  EXPECT_THAT(values->span().subspan(0, 3), ElementsAre(-2.0f, -4.0f, -6.0f));
  EXPECT_THAT(values->span().subspan(3), Each(-8.0f));
  ASSERT_TRUE(shard->WaitForSharedMemory(absl::Seconds(20)));
  ASSERT_OK_AND_ASSIGN(
      response, PushThenPullSpans(
                    *shard, {g.subspan(0, 3), g.subspan(3)},
                    {values->span().subspan(0, 3), values->span().subspan(3)}));
  EXPECT_THAT(values->span().subspan(3), Each(-12.0f));
  EXPECT_EQ(shard->bytes_copied(), 0);
  EXPECT_FALSE(values->retired());
}

// Gradients in the client's memory are checked as over TCP: one NaN and
// the whole batch is rejected, no variable touched; the same memory, made
// finite, is applied.
TEST_F(SharedMemoryTest, NonFiniteGradientsInSharedMemoryAreRejectedWhole) {
  StartServer(SharedMemorySessions::Options{});
  std::unique_ptr<SharedMemoryShard> shard = Connect(1 << 20);
  ASSERT_TRUE(shard->WaitForSharedMemory(absl::Seconds(20)));
  std::shared_ptr<SharedBuffer> gradients = shard->AllocateShared(3 + kChunk);
  std::shared_ptr<SharedBuffer> values = shard->AllocateShared(3 + kChunk);
  ASSERT_NE(gradients, nullptr);
  ASSERT_NE(values, nullptr);
  absl::Span<float> g = gradients->span();
  std::fill(g.begin(), g.end(), 1.0f);
  g[3 + kChunk - 1] = std::nanf("");
  const std::vector<float> b_before = Values("b");
  const std::vector<float> w_before = Values("w");

  EXPECT_THAT(PushThenPullSpans(
                  *shard, {g.subspan(0, 3), g.subspan(3)},
                  {values->span().subspan(0, 3), values->span().subspan(3)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::HasSubstr("not finite")));
  EXPECT_EQ(Values("b"), b_before);
  EXPECT_EQ(Values("w"), w_before);
  EXPECT_EQ(shard->bytes_copied(), 0);  // it went through the region

  g[3 + kChunk - 1] = 1.0f;
  ASSERT_OK_AND_ASSIGN(
      PushBatchResponse response,
      PushThenPullSpans(
          *shard, {g.subspan(0, 3), g.subspan(3)},
          {values->span().subspan(0, 3), values->span().subspan(3)}));
  EXPECT_THAT(response.pulled().versions(), ElementsAre(1, 1));
  EXPECT_THAT(values->span().subspan(0, 3), ElementsAre(-1.0f, -1.0f, -1.0f));
  EXPECT_THAT(values->span().subspan(3), Each(-1.0f));
}

TEST_F(SharedMemoryTest, ServerWithSharedMemoryOffKeepsTheClientOnTcp) {
  SharedMemorySessions::Options off;
  off.enabled = false;
  StartServer(off);
  std::unique_ptr<SharedMemoryShard> shard = Connect(1 << 20);
  EXPECT_FALSE(shard->WaitForSharedMemory(absl::Seconds(20)));
  ASSERT_OK(Push(*shard, 0, 2.0f));
  ASSERT_OK(PushBatch(*shard, 4.0f));
  std::vector<float> w(kChunk);
  ASSERT_OK(Pull(*shard, 0, w));
  EXPECT_THAT(w, Each(-2.0f));
  EXPECT_THAT(Values("b"), ElementsAre(-1.0f, -2.0f, -3.0f));
  EXPECT_EQ(server_->Stats().shared_memory_bytes(), 0);
  EXPECT_EQ(server_->Stats().shared_memory_sessions(), 0);
}

TEST_F(SharedMemoryTest, ForgottenSessionIsResentOverTcpOnceAndReattached) {
  StartServer(SharedMemorySessions::Options{});
  std::unique_ptr<SharedMemoryShard> shard = Connect(1 << 20);
  ASSERT_TRUE(shard->WaitForSharedMemory(absl::Seconds(20)));
  // As a restarted server would have.
  auto forget = [&] { server_->shared_memory().DetachAll(); };

  // A push the server refused before applying is resent once, over TCP.
  forget();
  ASSERT_OK_AND_ASSIGN(PushResponse pushed, Push(*shard, 0, 2.0f));
  EXPECT_EQ(pushed.version(), 1);
  EXPECT_THAT(Values("w")[0], -2.0f);
  ASSERT_TRUE(shard->WaitForSharedMemory(absl::Seconds(20)));

  forget();
  ASSERT_OK(PushBatch(*shard, 4.0f));
  EXPECT_THAT(Values("b"), ElementsAre(-1.0f, -2.0f, -3.0f));
  EXPECT_EQ(Values("w")[kChunk], -4.0f);
  ASSERT_TRUE(shard->WaitForSharedMemory(absl::Seconds(20)));

  forget();
  std::vector<float> w(kChunk);
  ASSERT_OK_AND_ASSIGN(PullResponse pulled, Pull(*shard, 0, w));
  EXPECT_EQ(pulled.version(), 1);
  EXPECT_THAT(w, Each(-2.0f));
  ASSERT_TRUE(shard->WaitForSharedMemory(absl::Seconds(20)));

  // Rows too: refused before anything was applied, resent over TCP.
  forget();
  PushAndPullRows(*shard);
  ASSERT_TRUE(shard->WaitForSharedMemory(absl::Seconds(20)));

  // Back on shared memory.
  const int64_t before = server_->Stats().shared_memory_bytes();
  ASSERT_OK(Pull(*shard, 0, w));
  EXPECT_EQ(server_->Stats().shared_memory_bytes() - before, kChunk * 4);
}

TEST_F(SharedMemoryTest, PieceOfACallTheClientGaveUpOnIsNeverReused) {
  StartServer(SharedMemorySessions::Options{});
  std::unique_ptr<SharedMemoryShard> shard = Connect(1 << 20);
  ASSERT_TRUE(shard->WaitForSharedMemory(absl::Seconds(20)));
  std::vector<float> w(kChunk);
  // Waits for a step that never comes: the client's deadline ends it, and
  // the server could still be about to write the answer into the region.
  EXPECT_THAT(Pull(*shard, 0, w, /*min_version=*/5,
                   absl::Now() + absl::Milliseconds(300)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(shard->shared_memory_bytes_held(), kChunk * 4);
  // Later calls use other pieces, and still go through shared memory.
  ASSERT_OK(Push(*shard, 0, 2.0f));
  ASSERT_OK(Pull(*shard, 0, w));
  EXPECT_THAT(w, Each(-2.0f));
  EXPECT_EQ(shard->shared_memory_bytes_held(), kChunk * 4);
}

TEST_F(SharedMemoryTest, RegionMostlyGivenUpIsReplacedByAFreshOne) {
  StartServer(SharedMemorySessions::Options{});
  std::unique_ptr<SharedMemoryShard> shard =
      Connect(4 * kChunk * 4);  // 4 pieces
  ASSERT_TRUE(shard->WaitForSharedMemory(absl::Seconds(20)));
  std::vector<float> w(kChunk);
  for (int i = 0; i < 3; ++i) {
    EXPECT_THAT(Pull(*shard, 0, w, /*min_version=*/5,
                     absl::Now() + absl::Milliseconds(200)),
                StatusIs(absl::StatusCode::kDeadlineExceeded));
  }
  // Three of four pieces were given up: a fresh region took over.
  ASSERT_TRUE(shard->WaitForSharedMemory(absl::Seconds(20)));
  EXPECT_EQ(shard->shared_memory_bytes_held(), 0);
  const int64_t before = server_->Stats().shared_memory_bytes();
  ASSERT_OK(Push(*shard, 0, 2.0f));
  ASSERT_OK(Pull(*shard, 0, w));
  EXPECT_THAT(w, Each(-2.0f));
  EXPECT_EQ(server_->Stats().shared_memory_bytes() - before, 2 * kChunk * 4);
}

TEST_F(SharedMemoryTest, WrongSizedBuffersGetTheErrorsTcpGives) {
  StartServer(SharedMemorySessions::Options{});
  std::unique_ptr<SharedMemoryShard> shard = Connect(1 << 20);
  ASSERT_TRUE(shard->WaitForSharedMemory(absl::Seconds(20)));
  // A buffer longer than the chunk must not be filled from (or read past)
  // the chunk's piece of the region.
  std::vector<float> too_long(kChunk + 1);
  EXPECT_THAT(Pull(*shard, 0, too_long),
              StatusIs(absl::StatusCode::kInvalidArgument));
  testing::PushOptions declared;
  declared.num_elements = kChunk;
  absl::StatusOr<PushResponse> pushed = testing::PushOne(
      *shard, "w", 0,
      std::make_shared<const std::vector<float>>(kChunk - 1, 1.0f), Soon(),
      declared);
  EXPECT_THAT(pushed,
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::HasSubstr("payload holds 255 values")));
  EXPECT_THAT(Values("w"), Each(0.0f));
  EXPECT_EQ(shard->shared_memory_bytes_held(), 0);
}

TEST_F(SharedMemoryTest, CallsThatFindTheRegionFullGoOverTcp) {
  StartServer(SharedMemorySessions::Options{});
  // Room for two 1 KiB chunks: most of 32 concurrent pulls find it full.
  std::unique_ptr<SharedMemoryShard> shard = Connect(2 * kChunk * 4);
  ASSERT_TRUE(shard->WaitForSharedMemory(absl::Seconds(20)));
  ASSERT_OK(Push(*shard, 0, 2.0f));
  ASSERT_OK(Push(*shard, kChunk, 3.0f));

  constexpr int kPulls = 32;
  std::vector<std::vector<float>> out(kPulls, std::vector<float>(kChunk));
  std::vector<absl::Status> status(kPulls);
  Mutex mu;
  int left = kPulls;
  for (int i = 0; i < kPulls; ++i) {
    PullBatchRequest header;
    header.set_protocol_version(kProtocolVersion);
    PullRequest* part = header.add_parts();
    part->set_variable("w");
    part->set_offset_elements((i % 2) * kChunk);
    part->set_num_elements(kChunk);
    shard->PullBatch(header, {absl::MakeSpan(out[i])}, Soon(),
                     [&, i](absl::StatusOr<PullBatchResponse> r) {
                       MutexLock lock(&mu);
                       status[i] = r.status();
                       --left;
                     });
  }
  {
    MutexLock lock(&mu);
    mu.Await(Condition(
        +[](int* n) { return *n == 0; }, &left));
  }
  for (int i = 0; i < kPulls; ++i) {
    ASSERT_OK(status[i]) << "pull " << i;
    EXPECT_THAT(out[i], Each(i % 2 == 0 ? -2.0f : -3.0f)) << "pull " << i;
  }
  const StatsResponse stats = server_->Stats();
  // Some went each way.
  EXPECT_GT(stats.shared_memory_bytes(), 0);
  EXPECT_GT(stats.bytes_sent(), kChunk * 4);
}

}  // namespace
}  // namespace psflow
