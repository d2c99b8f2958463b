// Least privilege on a real parameter server over gRPC: with the job's
// tokens, only the chief configures, creates, assigns, holds, saves,
// restores, excludes and shuts down; workers pull and push; the evaluator
// only pulls; callers without a token, or with another job's, are refused
// and change nothing.
#include <algorithm>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/grpc_ps_shard.h"
#include "client/ps_shard_test_util.h"
#include "client/shared_memory_shard.h"
#include "common/rpc/job_tokens.h"
#include "common/shared_memory_region.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"
#include "proto/ps.grpc.pb.h"
#include "ps/grpc_ps_server.h"

namespace psflow {
namespace {

using ::psflow::testing::PullOne;
using ::psflow::testing::PullRowsOne;
using ::psflow::testing::PushOne;
using ::psflow::testing::PushRowsOne;
using ::testing::Each;
using ::testing::HasSubstr;

absl::Time Soon() { return absl::Now() + absl::Seconds(30); }

class PsAuthorizationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(tokens_, GenerateJobTokens());
    const std::string dir = absl::StrCat(::testing::TempDir(), "/tokens");
    ASSERT_OK(WriteJobTokens(tokens_, dir));
    GrpcParameterServer::Options options;
    options.listen_address = "127.0.0.1:0";
    options.grace = absl::Seconds(2);
    ASSERT_OK_AND_ASSIGN(options.security.tokens,
                         LoadJobTokens(dir, RpcRole::kPs, true));
    ASSERT_OK_AND_ASSIGN(server_, GrpcParameterServer::Start(options));
  }

  // A client presenting `token` ("" none).
  std::unique_ptr<GrpcPsShard> Client(const std::string& token) {
    GrpcPsShard::Options options;
    options.security.tokens.own = token;
    return std::make_unique<GrpcPsShard>(
        absl::StrCat("127.0.0.1:", server_->port()), "ps-0", options);
  }
  std::unique_ptr<GrpcPsShard> As(RpcRole role) {
    return Client(tokens_.at(role));
  }
  // The same caller through shared memory and its call ring.
  std::unique_ptr<SharedMemoryShard> SameHost(
      RpcRole role, const std::string& chief_incarnation = "") {
    GrpcPsShard::Options options;
    options.security.tokens.own = tokens_.at(role);
    options.security.chief_incarnation = chief_incarnation;
    auto shard = std::make_unique<SharedMemoryShard>(
        std::make_unique<GrpcPsShard>(
            absl::StrCat("127.0.0.1:", server_->port()), "ps-0", options),
        int64_t{4} << 20);
    EXPECT_TRUE(shard->WaitForSharedMemory(absl::Seconds(30)));
    EXPECT_TRUE(shard->ring_in_use());
    return shard;
  }

  static ConfigureRequest Configuration() {
    ConfigureRequest configure;
    configure.set_protocol_version(kProtocolVersion);
    configure.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
    configure.mutable_learning_rate()->set_learning_rate(1.0);
    configure.set_mode(ASYNC);
    configure.set_num_workers(1);
    return configure;
  }

  // The chief configures and creates w (4 floats, zero).
  void Prepare() {
    auto chief = As(RpcRole::kChief);
    ASSERT_OK(chief->Configure(Configuration(), Soon()));
    CreateVariablesRequest create;
    create.set_protocol_version(kProtocolVersion);
    VariableSpec* spec = create.add_variables();
    spec->set_name("w");
    spec->add_shape(4);
    EmbeddingTableSpec* table = create.add_tables();
    table->set_name("emb");
    table->set_dim(2);
    table->mutable_initializer()->set_kind(RowInitializerConfig::ZEROS);
    ASSERT_OK(chief->CreateVariables(create, Soon()));
  }

  std::vector<float> Values(GrpcPsShard& shard) {
    std::vector<float> out(4, -1.0f);
    EXPECT_OK(PullOne(shard, "w", 0, absl::MakeSpan(out), 0, Soon()));
    return out;
  }

  static absl::Status AssignOnce(GrpcPsShard& shard) {
    AssignRequest header;
    header.set_protocol_version(kProtocolVersion);
    header.set_variable("w");
    header.set_num_elements(4);
    auto values = std::make_shared<std::vector<float>>(4, 7.0f);
    std::promise<absl::Status> done;
    shard.Assign(header, absl::MakeConstSpan(*values), values, Soon(),
                 [&done](absl::Status status) { done.set_value(status); });
    return done.get_future().get();
  }

  std::map<RpcRole, std::string> tokens_;
  std::unique_ptr<GrpcParameterServer> server_;
};

TEST_F(PsAuthorizationTest, AWorkerPullsAndPushesButCannotControlTheServer) {
  Prepare();
  auto worker = As(RpcRole::kWorker);
  ASSERT_OK(worker->Configure(Configuration(), Soon()));  // a handshake
  EXPECT_OK(PushOne(*worker, "w", 0,
                    std::make_shared<std::vector<float>>(4, 1.0f), Soon()));
  EXPECT_THAT(Values(*worker), ::testing::Each(-1.0f));

  const auto denied = [](const absl::Status& status, const std::string& what) {
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kPermissionDenied,
                                 HasSubstr(what + " is for the chief only")))
        << what;
  };
  denied(worker->Shutdown("a worker's whim", Soon()), "Shutdown");
  denied(AssignOnce(*worker), "/psflow.ParameterServerBulk/Assign");
  SaveShardRequest save;
  save.set_protocol_version(kProtocolVersion);
  save.set_path(absl::StrCat(::testing::TempDir(), "/stolen"));
  denied(worker->SaveShard(save, Soon()).status(), "SaveShard");
  RestoreShardRequest restore;
  restore.set_protocol_version(kProtocolVersion);
  denied(worker->RestoreShard(restore, Soon()).status(), "RestoreShard");
  CreateVariablesRequest create;
  create.set_protocol_version(kProtocolVersion);
  denied(worker->CreateVariables(create, Soon()), "CreateVariables");
  HoldRequest hold;
  hold.set_protocol_version(kProtocolVersion);
  denied(worker->Hold(hold, Soon()).status(), "Hold");
  ExcludeWorkersRequest exclude;
  exclude.set_protocol_version(kProtocolVersion);
  denied(worker->ExcludeWorkers(exclude, Soon()), "ExcludeWorkers");

  // Still serving, and the model is the push's, not the Assign's.
  EXPECT_FALSE(server_->shutdown_requested());
  auto chief = As(RpcRole::kChief);
  EXPECT_THAT(Values(*chief), ::testing::Each(-1.0f));
  EXPECT_OK(AssignOnce(*chief));
  EXPECT_THAT(Values(*chief), ::testing::Each(7.0f));
  EXPECT_OK(chief->Shutdown("job finished", Soon()));
  EXPECT_EQ(server_->Wait(), "job finished");
}

TEST_F(PsAuthorizationTest, TheEvaluatorOnlyPulls) {
  Prepare();
  auto evaluator = As(RpcRole::kEvaluator);
  EXPECT_THAT(Values(*evaluator), ::testing::Each(0.0f));
  EXPECT_THAT(PushOne(*evaluator, "w", 0,
                      std::make_shared<std::vector<float>>(4, 1.0f), Soon())
                  .status(),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("the chief or a worker only")));
  EXPECT_OK(evaluator->Stats(Soon()).status());
  // An admin tool may look, not touch.
  auto admin = As(RpcRole::kAdmin);
  EXPECT_OK(admin->Stats(Soon()).status());
  std::vector<float> out(4);
  EXPECT_THAT(PullOne(*admin, "w", 0, absl::MakeSpan(out), 0, Soon()).status(),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(Values(*evaluator), ::testing::Each(0.0f));
}

// Pulls that train are a trainer's: the evaluator may read rows, not
// create them, and may not move a worker's clock (over gRPC and the ring).
TEST_F(PsAuthorizationTest, TheEvaluatorsPullsNeverTrain) {
  Prepare();
  auto clocked_pull = [](PsShard& shard) {
    PullBatchRequest header;
    header.set_protocol_version(kProtocolVersion);
    PullRequest* part = header.add_parts();
    part->set_variable("w");
    part->set_num_elements(4);
    header.mutable_worker_clock()->set_worker_index(0);
    header.mutable_worker_clock()->set_clock(int64_t{1} << 40);
    header.mutable_worker_clock()->set_join(true);
    std::vector<float> out(4);
    std::promise<absl::Status> done;
    shard.PullBatch(header, {absl::MakeSpan(out)}, Soon(),
                    [&done](absl::StatusOr<PullBatchResponse> answer) {
                      done.set_value(answer.status());
                    });
    return done.get_future().get();
  };
  auto rows_in_emb = [this] {
    const StatsResponse stats = server_->Stats();
    for (const TableStats& table : stats.tables()) {
      if (table.name() == "emb") return table.rows();
    }
    return int64_t{-1};
  };
  std::unique_ptr<GrpcPsShard> over_grpc = As(RpcRole::kEvaluator);
  std::unique_ptr<SharedMemoryShard> on_the_ring =
      SameHost(RpcRole::kEvaluator);
  for (PsShard* evaluator : {static_cast<PsShard*>(over_grpc.get()),
                             static_cast<PsShard*>(on_the_ring.get())}) {
    std::vector<float> row(4);  // 2 ids x dim 2
    EXPECT_THAT(
        PullRowsOne(*evaluator, "emb", {5, 6}, absl::MakeSpan(row), Soon(),
                    [](PullRowsRequest& header) { header.set_train(true); })
            .status(),
        StatusIs(absl::StatusCode::kPermissionDenied,
                 HasSubstr("the chief or a worker only")));
    EXPECT_THAT(clocked_pull(*evaluator),
                StatusIs(absl::StatusCode::kPermissionDenied,
                         HasSubstr("the chief or a worker only")));
    // Reading stays open.
    EXPECT_OK(PullRowsOne(
        *evaluator, "emb", {5}, absl::MakeSpan(row).subspan(0, 2), Soon(),
        [](PullRowsRequest& header) { header.set_train(false); }));
  }
  EXPECT_EQ(rows_in_emb(), 0);
  // A worker's training pull does create its rows.
  std::vector<float> row(2);
  EXPECT_OK(PullRowsOne(
      *As(RpcRole::kWorker), "emb", {5}, absl::MakeSpan(row), Soon(),
      [](PullRowsRequest& header) { header.set_train(true); }));
  EXPECT_EQ(rows_in_emb(), 1);
}

// A shared-memory session is its attacher's: another member of the job
// that names it over gRPC (its id leaked) is refused, and the region keeps
// what it held; the attacher's own call goes through.
TEST_F(PsAuthorizationTest, AnotherCallersSharedMemorySessionIsRefused) {
  Prepare();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SharedMemoryRegion> region,
                       SharedMemoryRegion::Create(1 << 16));
  const AttachSharedMemoryRequest attach = AttachRequestFor(*region);
  auto worker = As(RpcRole::kWorker);
  std::promise<absl::StatusOr<AttachSharedMemoryResponse>> attached;
  worker->OfferSharedMemory(
      attach, [&attached](absl::StatusOr<AttachSharedMemoryResponse> answer) {
        attached.set_value(std::move(answer));
      });
  ASSERT_OK_AND_ASSIGN(AttachSharedMemoryResponse session,
                       attached.get_future().get());

  PullBatchRequest pull;
  pull.set_protocol_version(kProtocolVersion);
  PullRequest* part = pull.add_parts();
  part->set_variable("w");
  part->set_num_elements(4);
  pull.mutable_shared()->set_session(session.session());
  pull.mutable_shared()->set_offset(kSharedMemoryHeaderBytes);
  pull.mutable_shared()->set_bytes(4 * sizeof(float));
  auto pull_as = [&pull](GrpcPsShard& shard) {
    std::promise<absl::Status> done;
    shard.PullBatch(pull, {}, Soon(),
                    [&done](absl::StatusOr<PullBatchResponse> answer) {
                      done.set_value(answer.status());
                    });
    return done.get_future().get();
  };
  float* values =
      reinterpret_cast<float*>(region->base() + kSharedMemoryHeaderBytes);
  std::fill(values, values + 4, 9.0f);
  auto evaluator = As(RpcRole::kEvaluator);
  EXPECT_THAT(pull_as(*evaluator),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("belongs to another caller")));
  EXPECT_THAT(std::vector<float>(values, values + 4), Each(9.0f));
  EXPECT_OK(pull_as(*worker));
  EXPECT_THAT(std::vector<float>(values, values + 4), Each(0.0f));
}

TEST_F(PsAuthorizationTest, StrangersAreRefusedAndChangeNothing) {
  Prepare();
  ASSERT_OK_AND_ASSIGN(auto others, GenerateJobTokens());
  for (const std::string& token : {std::string(), others.at(RpcRole::kChief)}) {
    auto stranger = Client(token);
    const absl::StatusCode code = absl::StatusCode::kUnauthenticated;
    EXPECT_THAT(PushOne(*stranger, "w", 0,
                        std::make_shared<std::vector<float>>(4, 1.0f), Soon())
                    .status(),
                StatusIs(code, HasSubstr("--token_dir")));
    EXPECT_THAT(AssignOnce(*stranger), StatusIs(code));
    std::vector<float> out(4);
    EXPECT_THAT(
        PullOne(*stranger, "w", 0, absl::MakeSpan(out), 0, Soon()).status(),
        StatusIs(code));
    EXPECT_THAT(stranger->Stats(Soon()).status(), StatusIs(code));
    EXPECT_THAT(stranger->Shutdown("bye", Soon()), StatusIs(code));
    EXPECT_THAT(stranger->Configure(Configuration(), Soon()).status(),
                StatusIs(code));
  }
  EXPECT_FALSE(server_->shutdown_requested());
  auto chief = As(RpcRole::kChief);
  EXPECT_THAT(Values(*chief), ::testing::Each(0.0f));
}

// Every control request is refused by its caller's role and bounded by
// its size before it is parsed: a parser keeps a 2-byte unknown field as
// 16 bytes, so a Stats of 2 MiB of them would cost 16 MiB of objects.
TEST_F(PsAuthorizationTest, ControlRequestsAreBoundedBeforeTheyAreParsed) {
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                          grpc::InsecureChannelCredentials());
  std::unique_ptr<ParameterServer::Stub> stub =
      ParameterServer::NewStub(channel);
  StatsRequest bloated;
  bloated.GetReflection()->MutableUnknownFields(&bloated)->AddLengthDelimited(
      1000, std::string(2 << 20, 'x'));
  ASSERT_OK_AND_ASSIGN(auto others, GenerateJobTokens());
  const auto stats = [&](const std::string& token,
                         const StatsRequest& request) {
    grpc::ClientContext context;
    if (!token.empty()) {
      context.AddMetadata(kTokenMetadataKey, std::string(kTokenScheme) + token);
    }
    context.set_deadline(absl::ToChronoTime(Soon()));
    StatsResponse response;
    return stub->Stats(&context, request, &response);
  };
  grpc::Status status = stats(tokens_.at(RpcRole::kWorker), bloated);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(),
              HasSubstr("Stats request of " +
                        std::to_string(bloated.ByteSizeLong()) + " bytes"));
  for (const std::string& token : {std::string(), others.at(RpcRole::kChief)}) {
    EXPECT_EQ(stats(token, bloated).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_TRUE(stats(tokens_.at(RpcRole::kWorker), StatsRequest()).ok());
}

// Calls through the call ring in shared memory are authorized as the
// identity that attached the region, each as a gRPC call would be.
TEST_F(PsAuthorizationTest, TheCallRingChecksEachCallAsGrpcDoes) {
  Prepare();
  auto worker = SameHost(RpcRole::kWorker);
  EXPECT_OK(PushOne(*worker, "w", 0,
                    std::make_shared<std::vector<float>>(4, 1.0f), Soon()));
  const int64_t after_worker = server_->Stats().shared_memory_ring_calls();
  EXPECT_GE(after_worker, 1);

  auto evaluator = SameHost(RpcRole::kEvaluator);
  std::vector<float> out(4);
  EXPECT_OK(PullOne(*evaluator, "w", 0, absl::MakeSpan(out), 0, Soon()));
  EXPECT_THAT(out, ::testing::Each(-1.0f));
  EXPECT_THAT(PushOne(*evaluator, "w", 0,
                      std::make_shared<std::vector<float>>(4, 1.0f), Soon())
                  .status(),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("the chief or a worker only")));
  // Both went through the ring, and the refused push changed nothing.
  EXPECT_GE(server_->Stats().shared_memory_ring_calls(), after_worker + 2);
  EXPECT_THAT(Values(*As(RpcRole::kChief)), ::testing::Each(-1.0f));

  // Rows the same: the worker pushes, the evaluator reads but may not push.
  EXPECT_OK(PushRowsOne(*worker, "emb", {3}, {1, 1}, Soon()));
  const int64_t before_rows = server_->Stats().shared_memory_ring_calls();
  std::vector<float> row(2);
  EXPECT_OK(
      PullRowsOne(*evaluator, "emb", {3}, absl::MakeSpan(row), Soon(),
                  [](PullRowsRequest& header) { header.set_train(false); }));
  EXPECT_THAT(row, ::testing::Each(-1.0f));
  EXPECT_THAT(PushRowsOne(*evaluator, "emb", {3}, {1, 1}, Soon()),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("the chief or a worker only")));
  EXPECT_EQ(server_->Stats().shared_memory_ring_calls(), before_rows + 2);
  EXPECT_OK(PullRowsOne(*As(RpcRole::kChief), "emb", {3}, absl::MakeSpan(row),
                        Soon()));
  EXPECT_THAT(row, ::testing::Each(-1.0f));
}

TEST_F(PsAuthorizationTest, TheCallRingFencesAChiefTheServerNoLongerFollows) {
  // A server whose chief is taken over soon after it falls silent.
  server_.reset();
  GrpcParameterServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.grace = absl::Seconds(2);
  options.chief_takeover_after = absl::Milliseconds(200);
  const std::string dir = absl::StrCat(::testing::TempDir(), "/tokens");
  ASSERT_OK_AND_ASSIGN(options.security.tokens,
                       LoadJobTokens(dir, RpcRole::kPs, true));
  ASSERT_OK_AND_ASSIGN(server_, GrpcParameterServer::Start(options));

  // Chief "b" configures the server and trains through its ring.
  GrpcPsShard::Options b_options;
  b_options.security.tokens.own = tokens_.at(RpcRole::kChief);
  b_options.security.chief_incarnation = "incarnation-b";
  GrpcPsShard chief_b(absl::StrCat("127.0.0.1:", server_->port()), "ps-0",
                      b_options);
  ASSERT_OK(chief_b.Configure(Configuration(), Soon()));
  CreateVariablesRequest create;
  create.set_protocol_version(kProtocolVersion);
  VariableSpec* spec = create.add_variables();
  spec->set_name("w");
  spec->add_shape(4);
  ASSERT_OK(chief_b.CreateVariables(create, Soon()));
  auto ring_b = SameHost(RpcRole::kChief, "incarnation-b");
  ASSERT_OK(PushOne(*ring_b, "w", 0,
                    std::make_shared<std::vector<float>>(4, 1.0f), Soon()));

  // Chief "a" takes over once "b" fell silent.
  GrpcPsShard::Options a_options = b_options;
  a_options.security.chief_incarnation = "incarnation-a";
  GrpcPsShard chief_a(absl::StrCat("127.0.0.1:", server_->port()), "ps-0",
                      a_options);
  while (!chief_a.Stats(Soon()).ok()) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  // "b"'s ring is fenced as its gRPC calls would be.
  EXPECT_THAT(PushOne(*ring_b, "w", 0,
                      std::make_shared<std::vector<float>>(4, 1.0f), Soon())
                  .status(),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("incarnation-b")));
  EXPECT_THAT(Values(chief_a), ::testing::Each(-1.0f));
}

// The chief fence follows the chief's incarnation; one sent by a caller
// of another role (over gRPC or its call ring) is ignored, so no worker,
// evaluator or admin can take the fence first and lock the chief out.
TEST_F(PsAuthorizationTest, OnlyTheChiefsIncarnationCountsForTheFence) {
  for (RpcRole role :
       {RpcRole::kWorker, RpcRole::kEvaluator, RpcRole::kAdmin}) {
    GrpcPsShard::Options options;
    options.security.tokens.own = tokens_.at(role);
    options.security.chief_incarnation = "not-the-chief";
    GrpcPsShard impostor(absl::StrCat("127.0.0.1:", server_->port()), "ps-0",
                         options);
    SCOPED_TRACE(RpcRoleName(role));
    EXPECT_OK(impostor.Stats(Soon()).status());
  }
  // A worker's ring, attached with the impostor's incarnation, before the
  // chief's first call.
  auto ring = SameHost(RpcRole::kWorker, "not-the-chief");

  GrpcPsShard::Options chief_options;
  chief_options.security.tokens.own = tokens_.at(RpcRole::kChief);
  chief_options.security.chief_incarnation = "the-chief";
  GrpcPsShard chief(absl::StrCat("127.0.0.1:", server_->port()), "ps-0",
                    chief_options);
  ASSERT_OK(chief.Configure(Configuration(), Soon()));
  CreateVariablesRequest create;
  create.set_protocol_version(kProtocolVersion);
  VariableSpec* spec = create.add_variables();
  spec->set_name("w");
  spec->add_shape(4);
  ASSERT_OK(chief.CreateVariables(create, Soon()));

  // The impostors still do what their roles may, without taking over.
  EXPECT_OK(PushOne(*ring, "w", 0,
                    std::make_shared<std::vector<float>>(4, 1.0f), Soon()));
  GrpcPsShard::Options options;
  options.security.tokens.own = tokens_.at(RpcRole::kWorker);
  options.security.chief_incarnation = "not-the-chief";
  GrpcPsShard worker(absl::StrCat("127.0.0.1:", server_->port()), "ps-0",
                     options);
  EXPECT_OK(PushOne(worker, "w", 0,
                    std::make_shared<std::vector<float>>(4, 1.0f), Soon()));
  EXPECT_OK(chief.Stats(Soon()).status());
  EXPECT_THAT(Values(chief), ::testing::Each(-2.0f));
}

TEST_F(PsAuthorizationTest, OnlyTheChiefConfigures) {
  auto worker = As(RpcRole::kWorker);
  EXPECT_THAT(worker->Configure(Configuration(), Soon()).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("only the chief configures")));
  Prepare();
  EXPECT_OK(worker->Configure(Configuration(), Soon()).status());
  // A worker cannot change the configuration either.
  ConfigureRequest other = Configuration();
  other.set_mode(SYNC);
  EXPECT_THAT(worker->Configure(other, Soon()).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

}  // namespace
}  // namespace psflow
