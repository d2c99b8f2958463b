// A health probe carries no job token: the probed task (a worker, which
// may be compromised) must never receive the prober's (psctl's admin).
#include "client/health_check.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/mutex.h"
#include "common/rpc/transport_security.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "proto/health.grpc.pb.h"

namespace psflow {
namespace {

using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;

// Answers SERVING and keeps what each caller sent as "authorization".
class RecordingHealth final : public grpc::health::v1::Health::Service {
 public:
  grpc::Status Check(grpc::ServerContext* context, const HealthCheckRequest*,
                     HealthCheckResponse* response) override {
    MutexLock lock(&mu_);
    ++calls_;
    const auto& metadata = context->client_metadata();
    if (metadata.find(kTokenMetadataKey) != metadata.end()) ++with_token_;
    response->set_status(HealthCheckResponse::SERVING);
    return grpc::Status::OK;
  }
  int calls() const {
    MutexLock lock(&mu_);
    return calls_;
  }
  int with_token() const {
    MutexLock lock(&mu_);
    return with_token_;
  }

 private:
  mutable Mutex mu_;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  int with_token_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(HealthCheckTest, AProbeCarriesNoToken) {
  RecordingHealth health;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&health);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(port, 0);

  TransportSecurity admin;  // tokens without TLS: psctl with admin.token
  admin.tokens.own = std::string(64, 'a');
  ASSERT_TRUE(admin.tokens.presents());
  EXPECT_OK(CheckHealth(absl::StrCat("127.0.0.1:", port),
                        absl::Now() + absl::Seconds(30), admin));
  EXPECT_EQ(health.calls(), 1);
  EXPECT_EQ(health.with_token(), 0);
  server->Shutdown();
}

}  // namespace
}  // namespace psflow
