#include "ps/grpc_ps_server.h"

#include <sys/stat.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/grpc_ps_shard.h"
#include "client/ps_shard_test_util.h"
#include "common/free_port.h"
#include "common/mutex.h"
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

// A shard calling as the chief with `incarnation`.
std::unique_ptr<GrpcPsShard> ChiefClient(const GrpcParameterServer& server,
                                         const std::string& incarnation) {
  GrpcPsShard::Options options;
  options.security.chief_incarnation = incarnation;
  return std::make_unique<GrpcPsShard>(
      absl::StrCat("127.0.0.1:", server.port()), "ps-0", options);
}

// A client that dialed the server before it listened keeps that refusal
// as its channel's last error for a while: the shutdown must still reach
// the server once it is up, not take the old error for a server gone
// (which left it running until its own timeout).
TEST(GrpcParameterServerTest, AShutdownReachesAServerDialedBeforeItStarted) {
  ASSERT_OK_AND_ASSIGN(const int port, PickFreePort());
  const std::string address = absl::StrCat("127.0.0.1:", port);
  GrpcPsShard shard(address, "ps-0", GrpcPsShard::Options());
  // Refused: nothing listens yet.
  EXPECT_FALSE(shard.Stats(absl::Now() + absl::Milliseconds(300)).ok());
  GrpcParameterServer::Options options;
  options.listen_address = address;
  options.grace = absl::Seconds(2);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<GrpcParameterServer> server,
                       GrpcParameterServer::Start(options));
  ASSERT_OK(shard.Shutdown("job failed", absl::Now() + absl::Seconds(30)));
  EXPECT_EQ(server->Wait(), "job failed");
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
  std::unique_ptr<GrpcPsShard> chief = ChiefClient(*server, "a1");
  // The chief's Stats, every 100 ms for a second: the server stays up.
  for (int i = 0; i < 10; ++i) {
    ASSERT_OK(chief->Stats(absl::Now() + absl::Seconds(30)).status());
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_FALSE(server->shutdown_requested());
  // Then silence.
  EXPECT_THAT(server->Wait(), HasSubstr("the chief has not called for"));
  EXPECT_TRUE(server->chief_lost());
  EXPECT_FALSE(waiting->shutdown_requested());
  EXPECT_FALSE(waiting->chief_lost());
}

// A server no chief has called within first_chief_limit of its start
// shuts itself down (a job whose chief never came leaves no server
// behind); one the chief called is past that limit for good.
TEST(GrpcParameterServerTest, AServerNoChiefCalledShutsDown) {
  GrpcParameterServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.first_chief_limit = absl::Milliseconds(300);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<GrpcParameterServer> called,
                       GrpcParameterServer::Start(options));
  ASSERT_OK(ChiefClient(*called, "a1")
                ->Stats(absl::Now() + absl::Seconds(30))
                .status());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<GrpcParameterServer> server,
                       GrpcParameterServer::Start(options));
  // Another task's calls are not the chief's.
  GrpcPsShard worker(absl::StrCat("127.0.0.1:", server->port()), "ps-0",
                     GrpcPsShard::Options());
  ASSERT_OK(worker.Stats(absl::Now() + absl::Seconds(30)).status());
  EXPECT_THAT(server->Wait(), HasSubstr("no chief has called in"));
  EXPECT_TRUE(server->chief_lost());
  // Progress, not time: the other server outlived this one's limit.
  EXPECT_FALSE(called->shutdown_requested());
  EXPECT_FALSE(called->chief_lost());
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
  ASSERT_OK(ChiefClient(*server, "a1")
                ->Stats(absl::Now() + absl::Seconds(30))
                .status());
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
  std::unique_ptr<GrpcPsShard> owned_chief = ChiefClient(*server, "a1");
  GrpcPsShard& chief = *owned_chief;
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

absl::Status AssignOne(GrpcPsShard& shard, float value, absl::Time deadline) {
  AssignRequest header;
  header.set_protocol_version(kProtocolVersion);
  header.set_variable("w");
  header.set_num_elements(4);
  auto values = std::make_shared<const std::vector<float>>(4, value);
  Notification done;
  absl::Status result;
  shard.Assign(header, absl::MakeConstSpan(*values), values, deadline,
               [&](absl::Status status) {
                 result = status;
                 done.Notify();
               });
  done.WaitForNotification();
  return result;
}

// One job, one chief: a second chief of the job (another incarnation)
// changes nothing while the first keeps calling, whatever it asks; once
// the first has been silent past the takeover time, the second takes over
// and the first is refused from then on. Workers are never fenced.
TEST(GrpcParameterServerTest, TheServerFollowsOneChiefAtATime) {
  GrpcParameterServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.chief_takeover_after = absl::Seconds(1);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<GrpcParameterServer> server,
                       GrpcParameterServer::Start(options));
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  std::unique_ptr<GrpcPsShard> first = ChiefClient(*server, "a1");
  std::unique_ptr<GrpcPsShard> second = ChiefClient(*server, "b2");
  GrpcPsShard worker(absl::StrCat("127.0.0.1:", server->port()), "ps-0",
                     GrpcPsShard::Options());
  ConfigureRequest configure;
  configure.set_protocol_version(kProtocolVersion);
  configure.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
  configure.mutable_learning_rate()->set_learning_rate(1.0);
  configure.set_mode(ASYNC);
  configure.set_num_workers(1);
  ASSERT_OK(first->Configure(configure, deadline));
  CreateVariablesRequest create;
  create.set_protocol_version(kProtocolVersion);
  VariableSpec* spec = create.add_variables();
  spec->set_name("w");
  spec->add_shape(4);
  ASSERT_OK(first->CreateVariables(create, deadline));
  ASSERT_OK(AssignOne(*first, 1.0f, deadline));

  // For three takeover times the first chief keeps calling: every call of
  // the second is refused, control and bulk alike.
  const absl::Time calling_until = absl::Now() + absl::Seconds(3);
  while (absl::Now() < calling_until) {
    ASSERT_OK(first->Stats(deadline).status());
    EXPECT_THAT(second->Configure(configure, deadline),
                StatusIs(absl::StatusCode::kAborted,
                         HasSubstr("follows chief incarnation a1")));
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_THAT(AssignOne(*second, 9.0f, deadline),
              StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(second->CreateVariables(create, deadline),
              StatusIs(absl::StatusCode::kAborted));
  HoldRequest release;
  release.set_protocol_version(kProtocolVersion);
  release.set_action(HoldRequest::RELEASE);
  EXPECT_THAT(second->Hold(release, deadline),
              StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(
      second->Shutdown("stray", deadline),
      StatusIs(absl::StatusCode::kAborted, HasSubstr("Shutdown refused")));
  EXPECT_FALSE(server->shutdown_requested());
  std::vector<float> values(4, -1.0f);
  ASSERT_OK(
      PullOne(worker, "w", 0, absl::MakeSpan(values), 0, deadline).status());
  EXPECT_EQ(values, std::vector<float>(4, 1.0f)) << "the stray changed it";

  // The first falls silent (it died): the second takes over, and the first
  // cannot come back to roll the job back or stop it.
  absl::Status configured = second->Configure(configure, deadline).status();
  while (absl::IsAborted(configured) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
    configured = second->Configure(configure, deadline).status();
  }
  ASSERT_OK(configured);
  ASSERT_OK(AssignOne(*second, 2.0f, deadline));
  EXPECT_THAT(AssignOne(*first, 1.0f, deadline),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("follows chief incarnation b2")));
  EXPECT_THAT(first->Shutdown("stale", deadline),
              StatusIs(absl::StatusCode::kAborted));
  ASSERT_OK(
      PullOne(worker, "w", 0, absl::MakeSpan(values), 0, deadline).status());
  EXPECT_EQ(values, std::vector<float>(4, 2.0f));
  ASSERT_OK(second->Shutdown("job finished", deadline));
  EXPECT_EQ(server->Wait(), "job finished");
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
