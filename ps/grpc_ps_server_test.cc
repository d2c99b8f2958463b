#include "ps/grpc_ps_server.h"

#include <sys/stat.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/grpc_ps_shard.h"
#include "client/ps_shard_test_util.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"

namespace psflow {
namespace {

using ::psflow::testing::PullOne;
using ::psflow::testing::PushOne;
using ::testing::HasSubstr;

std::unique_ptr<GrpcParameterServer> StartServer() {
  GrpcParameterServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.grace = absl::Seconds(2);
  auto server = GrpcParameterServer::Start(options);
  EXPECT_OK(server.status());
  return server.ok() ? *std::move(server) : nullptr;
}

TEST(GrpcParameterServerTest, WaitReturnsTheShutdownRpcsReason) {
  std::unique_ptr<GrpcParameterServer> server = StartServer();
  ASSERT_NE(server, nullptr);
  GrpcPsShard shard(absl::StrCat("127.0.0.1:", server->port()), "ps-0",
                    GrpcPsShard::Options());
  ASSERT_OK(shard.Shutdown("job finished", absl::Now() + absl::Seconds(10)));
  EXPECT_EQ(server->Wait(), "job finished");
}

// A handler that runs while the server drains (a late Shutdown RPC) asks
// for shutdown too. Nothing the draining thread holds across the drain may
// be a lock that request takes: before, Wait() held it across Shutdown()
// and Wait(), so such a handler blocked and the drain, waiting for the
// handler, never ended. The hook runs where such a handler would.
TEST(GrpcParameterServerTest, ShutdownRequestedDuringTheDrainDoesNotBlock) {
  GrpcParameterServer* raw = nullptr;
  bool ran = false;
  GrpcParameterServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.during_drain_for_testing = [&] {
    raw->RequestShutdown("again");  // deadlocked before the fix
    ran = true;
  };
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<GrpcParameterServer> server,
                       GrpcParameterServer::Start(options));
  raw = server.get();
  server->RequestShutdown("first");
  EXPECT_EQ(server->Wait(), "first");
  EXPECT_TRUE(ran);
}

// A server whose chief, once heard from, falls silent shuts itself down
// (a job whose chief died for good leaves no server behind); a server no
// chief has called yet waits for one.
TEST(GrpcParameterServerTest, AServerWhoseChiefFellSilentShutsDown) {
  GrpcParameterServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.chief_silence_limit = absl::Seconds(2);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<GrpcParameterServer> waiting,
                       GrpcParameterServer::Start(options));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<GrpcParameterServer> server,
                       GrpcParameterServer::Start(options));
  GrpcPsShard chief(absl::StrCat("127.0.0.1:", server->port()), "ps-0",
                    GrpcPsShard::Options());
  // The chief's Stats, every 100 ms for a second: the server stays up.
  for (int i = 0; i < 10; ++i) {
    ASSERT_OK(chief.Stats(absl::Now() + absl::Seconds(30)).status());
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_FALSE(server->shutdown_requested());
  // Then silence.
  EXPECT_THAT(server->Wait(), HasSubstr("the chief has not called for"));
  EXPECT_TRUE(server->chief_lost());
  EXPECT_FALSE(waiting->shutdown_requested());
  EXPECT_FALSE(waiting->chief_lost());
}

// A save or restore the chief waits on counts as a sign of life however
// long it runs; silence counts from its end.
TEST(GrpcParameterServerTest, ALongChiefCallKeepsTheServerUp) {
  GrpcParameterServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.chief_silence_limit = absl::Milliseconds(500);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<GrpcParameterServer> server,
                       GrpcParameterServer::Start(options));
  server->ChiefCallStarted();
  absl::SleepFor(absl::Seconds(2));  // four limits into a "save"
  EXPECT_FALSE(server->shutdown_requested());
  server->ChiefCallEnded();
  EXPECT_THAT(server->Wait(), HasSubstr("the chief has not called for"));
}

// A sync checkpoint's hold is a lease: it stays while the chief calls, and
// the server lifts it by itself once the chief falls silent past the
// lease, so a chief that died mid-save does not freeze training. A hold
// without a lease is refused.
TEST(GrpcParameterServerTest, AHoldLapsesWhenTheChiefFallsSilent) {
  std::unique_ptr<GrpcParameterServer> server = StartServer();
  ASSERT_NE(server, nullptr);
  GrpcPsShard chief(absl::StrCat("127.0.0.1:", server->port()), "ps-0",
                    GrpcPsShard::Options());
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  ConfigureRequest configure;
  configure.set_protocol_version(kProtocolVersion);
  configure.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
  configure.mutable_learning_rate()->set_learning_rate(1.0);
  configure.set_mode(SYNC);
  configure.set_num_workers(1);
  configure.set_replicas_to_aggregate(1);
  ASSERT_OK(chief.Configure(configure, deadline));
  CreateVariablesRequest create;
  create.set_protocol_version(kProtocolVersion);
  VariableSpec* spec = create.add_variables();
  spec->set_name("w");
  spec->add_shape(4);
  ASSERT_OK(chief.CreateVariables(create, deadline));

  HoldRequest freeze;
  freeze.set_protocol_version(kProtocolVersion);
  freeze.set_action(HoldRequest::FREEZE);
  EXPECT_THAT(chief.Hold(freeze, deadline),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("a hold needs a lease")));
  freeze.set_lease_ms(1000);
  ASSERT_OK(chief.Hold(freeze, deadline).status());

  // Step 0's gradient arrives; the hold keeps it from being applied.
  GrpcPsShard worker(absl::StrCat("127.0.0.1:", server->port()), "ps-0",
                     GrpcPsShard::Options());
  std::thread push([&] {
    EXPECT_OK(PushOne(worker, "w", 0,
                      std::make_shared<const std::vector<float>>(4, 1.0f),
                      deadline)
                  .status());
  });
  // Three leases long, the chief keeps calling: the hold stays.
  const absl::Time calling_until = absl::Now() + absl::Seconds(3);
  while (absl::Now() < calling_until) {
    ASSERT_OK(chief.Stats(deadline).status());
    absl::SleepFor(absl::Milliseconds(50));
  }
  std::vector<float> values(4, -1.0f);
  ASSERT_OK(
      PullOne(worker, "w", 0, absl::MakeSpan(values), 0, deadline).status());
  EXPECT_EQ(values, std::vector<float>(4, 0.0f)) << "applied under the hold";

  // Then the chief falls silent: the hold lapses and the step is applied.
  ASSERT_OK(
      PullOne(worker, "w", 0, absl::MakeSpan(values), 1, deadline).status());
  EXPECT_EQ(values, std::vector<float>(4, -1.0f));
  push.join();
}

// A server started with a checkpoint root saves under it and refuses a
// peer's paths outside it, before touching any file.
TEST(GrpcParameterServerTest, CheckpointPathsOutsideTheRootAreRefused) {
  const std::string base = std::string(std::getenv("TEST_TMPDIR"));
  const std::string root = base + "/ckpt";
  GrpcParameterServer::Options options;
  options.listen_address = "127.0.0.1:0";
  ASSERT_OK_AND_ASSIGN(PathConfinement confinement,
                       PathConfinement::Create(root, "--checkpoint_root"));
  options.checkpoint_root = confinement;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<GrpcParameterServer> server,
                       GrpcParameterServer::Start(options));
  GrpcPsShard shard(absl::StrCat("127.0.0.1:", server->port()), "ps-0",
                    GrpcPsShard::Options());
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  ConfigureRequest configure;
  configure.set_protocol_version(kProtocolVersion);
  configure.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
  configure.mutable_learning_rate()->set_learning_rate(0.1);
  configure.set_mode(ASYNC);
  configure.set_num_workers(1);
  ASSERT_OK(shard.Configure(configure, deadline));

  SaveShardRequest save;
  save.set_protocol_version(kProtocolVersion);
  save.set_path(root + "/data-0");
  EXPECT_OK(shard.SaveShard(save, deadline));
  for (const std::string& outside :
       {base + "/elsewhere-data", root + "/../escaped-data",
        std::string("/tmp/psflow-escaped-data")}) {
    save.set_path(outside);
    EXPECT_THAT(shard.SaveShard(save, deadline),
                StatusIs(absl::StatusCode::kPermissionDenied,
                         HasSubstr("--checkpoint_root")))
        << outside;
    struct stat st;
    EXPECT_NE(stat(outside.c_str(), &st), 0) << outside << " was written";
  }

  RestoreShardRequest restore;
  restore.set_protocol_version(kProtocolVersion);
  RestoreSource* source = restore.add_targets()->add_sources();
  source->set_path("/etc/passwd");
  source->set_num_elements(1);
  EXPECT_THAT(shard.RestoreShard(restore, deadline),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("outside the checkpoint root")));
}

}  // namespace
}  // namespace psflow
