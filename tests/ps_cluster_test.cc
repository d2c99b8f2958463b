// Real ps_server processes on 127.0.0.1, driven by the client library.
#include <signal.h>

#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/grpc_ps_shard.h"
#include "client/health_check.h"
#include "client/local_ps_shard.h"
#include "client/ps_client.h"
#include "common/free_port.h"
#include "common/rpc/bulk_frame.h"
#include "common/status_macros.h"
#include "common/status_matchers.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"
#include "tests/test_paths.h"

namespace psflow {
namespace {

using ::psflow::testing::RunfilePath;
using ::psflow::testing::TempPath;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int64_t kChunkBytes = 64 * 1024;

// TF_CONFIG for ps `index` of `num_ps`: its own entry binds port 0; the
// other entries are never dialed by a ps, only validated.
std::string PsTfConfig(int index, int num_ps) {
  std::vector<std::string> ps;
  for (int i = 0; i < num_ps; ++i) {
    ps.push_back(i == index ? "\"127.0.0.1:0\""
                            : absl::StrCat("\"127.0.0.1:", 40000 + i, "\""));
  }
  return absl::StrCat(
      R"({"cluster": {"ps": [)", absl::StrJoin(ps, ", "),
      R"(], "worker": ["127.0.0.1:39999"]}, "task": {"type": "ps", "index": )",
      index, "}}");
}

struct PsProcess {
  std::unique_ptr<Subprocess> process;
  int port = 0;
};

absl::StatusOr<PsProcess> StartPs(int index, int num_ps) {
  const std::string port_file = TempPath("ps.port");
  PsProcess ps;
  ps.process = std::make_unique<Subprocess>(
      std::vector<std::string>{
          RunfilePath("ps/ps_server"), "--port_file=" + port_file,
          "--allow_unauthenticated_callers", "--bind_host=127.0.0.1",
          absl::StrCat("--chunk_bytes=", kChunkBytes),
          "--shutdown_grace_ms=500"},
      std::map<std::string, std::string>{
          {"TF_CONFIG", PsTfConfig(index, num_ps)}},
      TempPath("ps.log"));
  RETURN_IF_ERROR(ps.process->Start());
  absl::StatusOr<int> port = WaitForPortFile(port_file, absl::Seconds(30));
  if (!port.ok()) {
    return absl::Status(port.status().code(),
                        absl::StrCat(port.status().message(), "; output:\n",
                                     ps.process->Output()));
  }
  ps.port = *port;
  return ps;
}

ConfigureRequest AdamConfig() {
  ConfigureRequest config;
  config.set_protocol_version(kProtocolVersion);
  config.mutable_optimizer()->set_kind(OptimizerConfig::ADAM);
  config.mutable_learning_rate()->set_learning_rate(0.01);
  config.set_mode(ASYNC);
  return config;
}

absl::StatusOr<Placement> ModelPlacement(int num_ps) {
  // "kernel" (400 KB) is split over every server; the rest are whole.
  return PlaceVariables(
      {{"kernel", {1000, 100}}, {"bias", {100}}, {"head", {100, 10}}}, num_ps,
      /*split_threshold_bytes=*/256 * 1024);
}

// Runs the same pushes and pulls through `client`; returns the final model.
std::vector<float> Train(ParameterClient& client) {
  std::vector<float> kernel(100000), bias(100), head(1000);
  for (size_t i = 0; i < kernel.size(); ++i) kernel[i] = (i % 17) * 0.01f;
  EXPECT_OK(client.Assign({{"kernel", kernel}, {"bias", bias}, {"head", head}})
                ->Wait());
  std::vector<float> gk(kernel.size()), gb(bias.size()), gh(head.size());
  for (int step = 0; step < 5; ++step) {
    EXPECT_OK(client
                  .Pull({{"kernel", absl::MakeSpan(kernel)},
                         {"bias", absl::MakeSpan(bias)},
                         {"head", absl::MakeSpan(head)}})
                  ->Wait());
    for (size_t i = 0; i < gk.size(); ++i) gk[i] = kernel[i] - 0.5f;
    for (size_t i = 0; i < gb.size(); ++i) gb[i] = 1.0f + i * 0.01f;
    for (size_t i = 0; i < gh.size(); ++i) gh[i] = (i % 3) - 1.0f;
    EXPECT_OK(
        client.Push({{"kernel", gk}, {"bias", gb}, {"head", gh}})->Wait());
  }
  EXPECT_OK(client
                .Pull({{"kernel", absl::MakeSpan(kernel)},
                       {"bias", absl::MakeSpan(bias)},
                       {"head", absl::MakeSpan(head)}})
                ->Wait());
  std::vector<float> all = kernel;
  all.insert(all.end(), bias.begin(), bias.end());
  all.insert(all.end(), head.begin(), head.end());
  return all;
}

TEST(PsClusterTest, RealServersComputeExactlyWhatTheInProcessTwinDoes) {
  constexpr int kNumPs = 2;
  std::vector<PsProcess> servers;
  std::vector<std::unique_ptr<PsShard>> remote;
  for (int i = 0; i < kNumPs; ++i) {
    ASSERT_OK_AND_ASSIGN(PsProcess ps, StartPs(i, kNumPs));
    remote.push_back(std::make_unique<GrpcPsShard>(
        absl::StrCat("127.0.0.1:", ps.port), absl::StrCat("ps-", i),
        GrpcPsShard::Options()));
    servers.push_back(std::move(ps));
  }
  ASSERT_OK_AND_ASSIGN(Placement placement, ModelPlacement(kNumPs));
  ParameterClient grpc_client(std::move(remote), placement, {});
  ASSERT_OK(grpc_client.Configure(AdamConfig()));
  ASSERT_OK(grpc_client.CreateVariables());

  std::vector<std::unique_ptr<ParameterServerCore>> cores;
  std::vector<std::unique_ptr<PsShard>> local;
  for (int i = 0; i < kNumPs; ++i) {
    cores.push_back(std::make_unique<ParameterServerCore>(
        ParameterServerCore::Options{kChunkBytes}));
    local.push_back(
        std::make_unique<LocalPsShard>(cores.back().get(), "local"));
  }
  ParameterClient local_client(std::move(local), placement, {});
  ASSERT_OK(local_client.Configure(AdamConfig()));
  ASSERT_OK(local_client.CreateVariables());

  std::vector<float> over_grpc = Train(grpc_client);
  std::vector<float> in_process = Train(local_client);
  ASSERT_EQ(over_grpc.size(), in_process.size());
  EXPECT_TRUE(over_grpc == in_process)
      << "the gRPC path must be bit-identical to the in-process path";
  EXPECT_NE(over_grpc[0], 0.0f);

  ASSERT_OK_AND_ASSIGN(std::vector<StatsResponse> stats, grpc_client.Stats());
  for (const StatsResponse& s : stats) {
    EXPECT_GT(s.bytes_received(), 0);
    EXPECT_GT(s.bytes_sent(), 0);
  }

  ASSERT_OK(grpc_client.ShutdownAll("test finished"));
  for (PsProcess& ps : servers) {
    EXPECT_THAT(ps.process->Wait(absl::Seconds(15)), IsOkAndHolds(0))
        << ps.process->Output();
    EXPECT_THAT(ps.process->Output(), HasSubstr("stopped (test finished)"));
  }
}

TEST(PsClusterTest, SigtermStopsAServerCleanly) {
  ASSERT_OK_AND_ASSIGN(PsProcess ps, StartPs(0, 1));
  ps.process->Signal(SIGTERM);
  EXPECT_THAT(ps.process->Wait(absl::Seconds(15)), IsOkAndHolds(0))
      << ps.process->Output();
  EXPECT_THAT(ps.process->Output(), HasSubstr("received SIGTERM"));
}

TEST(PsClusterTest, BadTfConfigExitsWithTheProblemNamed) {
  Subprocess ps(
      {RunfilePath("ps/ps_server")},
      {{"TF_CONFIG",
        R"({"cluster": {"ps": ["127.0.0.1:0"]}, "task": {"type": "ps"}})"}},
      TempPath("ps.log"));
  ASSERT_OK(ps.Start());
  EXPECT_THAT(ps.Wait(absl::Seconds(15)), IsOkAndHolds(1));
  EXPECT_THAT(ps.Output(), HasSubstr("has no \"worker\" tasks"));
}

TEST(PsClusterTest, PortInUseExitsWithTheProblemNamed) {
  ASSERT_OK_AND_ASSIGN(PsProcess first, StartPs(0, 1));
  Subprocess second(
      {RunfilePath("ps/ps_server"), "--allow_unauthenticated_callers",
       "--bind_host=127.0.0.1"},
      {{"TF_CONFIG",
        absl::StrCat(
            R"({"cluster": {"ps": ["127.0.0.1:)", first.port,
            R"("], "worker": ["127.0.0.1:39999"]}, "task": {"type": "ps"}})")}},
      TempPath("ps.log"));
  ASSERT_OK(second.Start());
  EXPECT_THAT(second.Wait(absl::Seconds(15)), IsOkAndHolds(1));
  EXPECT_THAT(second.Output(), HasSubstr("the port is in use"));
}

TEST(PsClusterTest, UnreachableServerFailsWithinTheDeadline) {
  // A port that nothing listens on.
  ASSERT_OK_AND_ASSIGN(int dead_port, PickFreePort());
  std::vector<std::unique_ptr<PsShard>> shards;
  shards.push_back(std::make_unique<GrpcPsShard>(
      absl::StrCat("127.0.0.1:", dead_port), "ps-0 at the dead port",
      GrpcPsShard::Options()));
  ASSERT_OK_AND_ASSIGN(Placement placement, ModelPlacement(1));
  ParameterClient::Options options;
  options.rpc_timeout = absl::Seconds(1);
  ParameterClient client(std::move(shards), placement, options);
  const absl::Time start = absl::Now();
  absl::Status status = client.Configure(AdamConfig());
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kDeadlineExceeded,
                               HasSubstr("ps-0 at the dead port")));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(PsClusterTest, HealthIsServingWhileRunningAndGoneAfterShutdown) {
  ASSERT_OK_AND_ASSIGN(PsProcess ps, StartPs(0, 1));
  const std::string address = absl::StrCat("127.0.0.1:", ps.port);
  EXPECT_OK(CheckHealth(address, absl::Now() + absl::Seconds(10),
                        TransportSecurity()));
  ps.process->Signal(SIGTERM);
  ASSERT_THAT(ps.process->Wait(absl::Seconds(15)), IsOkAndHolds(0));
  EXPECT_THAT(
      CheckHealth(address, absl::Now() + absl::Seconds(2), TransportSecurity()),
      ::testing::Not(IsOk()));
}

TEST(PsClusterTest, WaitUntilHealthyNamesTheMissingTask) {
  ASSERT_OK_AND_ASSIGN(int dead_port, PickFreePort());
  const absl::Time start = absl::Now();
  EXPECT_THAT(WaitUntilHealthy(absl::StrCat("127.0.0.1:", dead_port),
                               "ps-3 at 127.0.0.1", start + absl::Seconds(1),
                               TransportSecurity()),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("ps-3 at 127.0.0.1 is not healthy"),
                             HasSubstr("same transport security"))));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(PsClusterTest, ClientWaitsForAServerThatStartsLate) {
  // A free port that stays free until the server takes it.
  ASSERT_OK_AND_ASSIGN(int port, PickFreePort());
  std::vector<std::unique_ptr<PsShard>> shards;
  shards.push_back(std::make_unique<GrpcPsShard>(
      absl::StrCat("127.0.0.1:", port), "ps-0", GrpcPsShard::Options()));
  ASSERT_OK_AND_ASSIGN(Placement placement, ModelPlacement(1));
  ParameterClient client(std::move(shards), placement, {});
  absl::Status configured;
  std::thread configure([&] { configured = client.Configure(AdamConfig()); });
  absl::SleepFor(absl::Milliseconds(500));  // The client is already waiting.
  Subprocess late(
      {RunfilePath("ps/ps_server"), "--allow_unauthenticated_callers",
       "--bind_host=127.0.0.1"},
      {{"TF_CONFIG",
        absl::StrCat(
            R"({"cluster": {"ps": ["127.0.0.1:)", port,
            R"("], "worker": ["127.0.0.1:39999"]}, "task": {"type": "ps"}})")}},
      TempPath("ps.log"));
  ASSERT_OK(late.Start());
  configure.join();
  EXPECT_OK(configured) << late.Output();
  EXPECT_OK(client.ShutdownAll("done"));
  EXPECT_THAT(late.Wait(absl::Seconds(15)), IsOkAndHolds(0));
}

// Sends one raw bulk request to a server and returns its status.
grpc::Status RawBulkCall(int port, const char* method,
                         const grpc::ByteBuffer& request) {
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                     grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue queue;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  grpc::ByteBuffer response;
  grpc::Status status;
  auto reader = stub.PrepareUnaryCall(&context, method, request, &queue);
  reader->StartCall();
  reader->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag;
  bool ok;
  queue.Next(&tag, &ok);
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
  return status;
}

TEST(PsClusterTest, MalformedAndTruncatedBulkRequestsAreRejected) {
  ASSERT_OK_AND_ASSIGN(PsProcess ps, StartPs(0, 1));
  std::vector<std::unique_ptr<PsShard>> shards;
  shards.push_back(std::make_unique<GrpcPsShard>(
      absl::StrCat("127.0.0.1:", ps.port), "ps-0", GrpcPsShard::Options()));
  ASSERT_OK_AND_ASSIGN(Placement placement, ModelPlacement(1));
  ParameterClient client(std::move(shards), placement, {});
  ASSERT_OK(client.Configure(AdamConfig()));
  ASSERT_OK(client.CreateVariables());

  std::string garbage = "\xff\xff\xff\xff\x0f not a frame";
  grpc::Slice slice(garbage);
  grpc::Status status =
      RawBulkCall(ps.port, kBulkPushBatchMethod, grpc::ByteBuffer(&slice, 1));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("not speaking psflow"));

  // The header promises 100 values of "bias"; the payload holds 99.
  PushBatchRequest header;
  header.set_protocol_version(kProtocolVersion);
  PushRequest* part = header.add_parts();
  part->set_variable("bias");
  part->set_num_elements(100);
  auto short_payload = std::make_shared<std::vector<float>>(99, 1.0f);
  status = RawBulkCall(ps.port, kBulkPushBatchMethod,
                       EncodeBulkFrame(header, *short_payload, short_payload));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("payload holds 99 values"));

  // A client of protocol 1 pushing one chunk through the method it had.
  status = RawBulkCall(ps.port, "/psflow.ParameterServerBulk/Push",
                       EncodeBulkFrame(header, {}, nullptr));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_THAT(status.error_message(), HasSubstr("another psflow release"));

  status = RawBulkCall(ps.port, "/psflow.ParameterServerBulk/Frobnicate",
                       EncodeBulkFrame(header, {}, nullptr));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);

  // Nothing reached the variable.
  std::vector<float> bias(100);
  ASSERT_OK(client.Pull({{"bias", absl::MakeSpan(bias)}})->Wait());
  EXPECT_THAT(bias, ::testing::Each(0.0f));
  ASSERT_OK(client.ShutdownAll("done"));
  EXPECT_THAT(ps.process->Wait(absl::Seconds(15)), IsOkAndHolds(0));
}

}  // namespace
}  // namespace psflow
