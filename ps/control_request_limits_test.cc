// Control requests are checked before they are parsed: a parser turns a
// request's repeated fields into objects tens of times their wire size, so
// a caller that may not create variables gets its refusal without the
// server parsing anything, and even the chief's requests are bounded.
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/rpc/channel.h"
#include "common/rpc/job_tokens.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"
#include "proto/ps.grpc.pb.h"
#include "ps/grpc_ps_server.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

// The process's peak resident memory (VmHWM).
int64_t PeakResidentBytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmHWM:") {
      int64_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
    status.ignore(1 << 20, '\n');
  }
  return 0;
}

// About `bytes` of CreateVariables: many small variables, what a parser
// multiplies most.
CreateVariablesRequest Huge(int64_t bytes) {
  CreateVariablesRequest request;
  request.set_protocol_version(kProtocolVersion);
  int64_t size = 0;
  for (int64_t i = 0; size < bytes; ++i) {
    VariableSpec* spec = request.add_variables();
    spec->set_name(absl::StrCat("v", i));
    spec->add_shape(1);
    size += 12;
  }
  return request;
}

class ControlRequestLimitsTest : public ::testing::Test {
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

  grpc::Status Create(const std::string& token,
                      const CreateVariablesRequest& request) {
    TransportSecurity security;
    security.tokens.own = token;
    auto stub = ParameterServer::NewStub(
        OpenChannel(absl::StrCat("127.0.0.1:", server_->port()), security));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    CreateVariablesResponse response;
    return stub->CreateVariables(&context, request, &response);
  }

  std::map<RpcRole, std::string> tokens_;
  std::unique_ptr<GrpcParameterServer> server_;
};

TEST_F(ControlRequestLimitsTest, RefusedCallersAreNotParsed) {
  // 48 MiB of variables parses into some 2 GB of objects.
  const CreateVariablesRequest huge = Huge(int64_t{48} << 20);
  const int64_t before = PeakResidentBytes();
  const grpc::Status stranger = Create("", huge);
  EXPECT_EQ(stranger.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  const grpc::Status worker = Create(tokens_.at(RpcRole::kWorker), huge);
  EXPECT_EQ(worker.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // The request is received (48 MiB, and gRPC's copies of it), never
  // parsed.
  // (Parsed, as before this check, the peak grew by about 830 MiB.)
  const int64_t grown = PeakResidentBytes() - before;
  std::cout << "peak resident memory grew by " << (grown >> 20) << " MiB\n";
  EXPECT_LT(grown, int64_t{512} << 20);
}

TEST_F(ControlRequestLimitsTest, TheChiefsRequestsAreBoundedToo) {
  const grpc::Status chief =
      Create(tokens_.at(RpcRole::kChief), Huge(kMaxControlRequestBytes + 1024));
  EXPECT_EQ(chief.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(chief.error_message(),
              HasSubstr(absl::StrCat("at most ", kMaxControlRequestBytes)));
}

}  // namespace
}  // namespace psflow
