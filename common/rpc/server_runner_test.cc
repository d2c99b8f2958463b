#include "common/rpc/server_runner.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/rpc/channel.h"
#include "common/rpc/health_server.h"
#include "common/status_matchers.h"
#include "grpcpp/client_context.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "proto/health.grpc.pb.h"

namespace psflow {
namespace {

using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;

// The serving status `port` reports, or the RPC's error code.
std::string Health(int port) {
  auto stub = grpc::health::v1::Health::NewStub(
      OpenChannel(absl::StrCat("127.0.0.1:", port), TransportSecurity()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, HealthCheckRequest(), &response);
  if (!status.ok()) return absl::StrCat("error ", status.error_code());
  return HealthCheckResponse::ServingStatus_Name(response.status());
}

TEST(ServerRunnerTest, PortZeroPicksAPortThatServesHealth) {
  ASSERT_OK_AND_ASSIGN(auto server,
                       StartHealthServer("127.0.0.1:0", TransportSecurity()));
  EXPECT_GT(server->port(), 0);
  EXPECT_EQ(Health(server->port()), "SERVING");
}

TEST(ServerRunnerTest, ABusyPortIsUnavailableNamingTheAddress) {
  ASSERT_OK_AND_ASSIGN(auto first,
                       StartHealthServer("127.0.0.1:0", TransportSecurity()));
  const std::string address = absl::StrCat("127.0.0.1:", first->port());
  EXPECT_THAT(
      StartHealthServer(address, TransportSecurity()),
      StatusIs(absl::StatusCode::kUnavailable, ::testing::HasSubstr(address)));
}

TEST(ServerRunnerTest, DrainStopsServingAndIsIdempotent) {
  ASSERT_OK_AND_ASSIGN(auto server,
                       StartHealthServer("127.0.0.1:0", TransportSecurity()));
  const int port = server->port();
  bool ran = false;
  server->Drain(absl::Seconds(1), [&] { ran = true; });
  EXPECT_TRUE(ran);
  EXPECT_NE(Health(port), "SERVING");
  server->Drain(absl::Seconds(1));  // again: nothing to do
}

}  // namespace
}  // namespace psflow
