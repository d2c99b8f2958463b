#include "ps/grpc_ps_server.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "client/grpc_ps_shard.h"
#include "common/status_matchers.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

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

}  // namespace
}  // namespace psflow
