// A ps_server started by hand, as docs/operations.md shows it, is closed to
// strangers: real processes, real sockets.
//
//   - with no TLS files and no token folder it refuses to start, naming
//     psctl certs gen, psctl tokens gen and the flags;
//   - told --allow_unauthenticated_callers, it listens on 127.0.0.1 only,
//     and still confines checkpoint files to its root (its working
//     directory by default): a SaveShard at any path of the caller's
//     choice and a RestoreShard that would reveal the size of /etc/shadow
//     are refused before any file is touched;
//   - with the job's tokens, an unauthenticated Shutdown, SaveShard or
//     Stats is refused and the server keeps serving;
//   - a token folder other users can write, or a token they can read, is
//     refused at start, naming the file and the mode to set.
#include <sys/stat.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/rpc/job_tokens.h"
#include "common/status_matchers.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"
#include "proto/ps.grpc.pb.h"
#include "tests/test_paths.h"

namespace psflow {
namespace {

using ::psflow::testing::RunfilePath;
using ::psflow::testing::TempPath;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

std::string PsTfConfig() {
  return R"({"cluster": {"ps": ["127.0.0.1:0"], "worker": ["127.0.0.1:1"]},
             "task": {"type": "ps", "index": 0}})";
}

struct Ps {
  std::unique_ptr<Subprocess> process;
  int port = 0;
};

// A ps_server with `flags` (no --bind_host: the default is under test),
// once it serves.
Ps StartPs(const std::string& name, std::vector<std::string> flags) {
  const std::string port_file = TempPath(name + ".port");
  std::vector<std::string> argv = {RunfilePath("ps/ps_server"),
                                   "--port_file=" + port_file};
  argv.insert(argv.end(), flags.begin(), flags.end());
  Ps ps;
  ps.process = std::make_unique<Subprocess>(
      argv, std::map<std::string, std::string>{{"TF_CONFIG", PsTfConfig()}},
      TempPath(name + ".log"));
  EXPECT_OK(ps.process->Start());
  absl::StatusOr<int> port = WaitForPortFile(port_file, absl::Seconds(60));
  EXPECT_OK(port) << ps.process->Output();
  ps.port = port.ok() ? *port : 1;
  return ps;
}

// The exit code and output of a ps_server that is expected to refuse to
// start.
std::pair<int, std::string> RefusedPs(
    const std::string& name, std::vector<std::string> flags,
    const std::string& tf_config = PsTfConfig()) {
  std::vector<std::string> argv = {RunfilePath("ps/ps_server")};
  argv.insert(argv.end(), flags.begin(), flags.end());
  Subprocess ps(argv, {{"TF_CONFIG", tf_config}}, TempPath(name + ".log"));
  EXPECT_OK(ps.Start());
  absl::StatusOr<int> code = ps.Wait(absl::Seconds(30));
  EXPECT_OK(code);
  return {code.ok() ? *code : -1, ps.Output()};
}

std::unique_ptr<ParameterServer::Stub> Stranger(int port) {
  return ParameterServer::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
}

std::unique_ptr<grpc::ClientContext> Context() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  return context;
}

grpc::Status SaveAt(ParameterServer::Stub& stub, const std::string& path) {
  SaveShardRequest request;
  request.set_protocol_version(kProtocolVersion);
  request.set_path(path);
  SaveShardResponse response;
  return stub.SaveShard(Context().get(), request, &response);
}

grpc::Status RestoreFrom(ParameterServer::Stub& stub, const std::string& path) {
  RestoreShardRequest request;
  request.set_protocol_version(kProtocolVersion);
  request.set_ps_index(0);
  request.set_num_ps(1);
  RestoreTarget* target = request.add_targets();
  target->set_variable("w");
  target->add_sources()->set_path(path);
  RestoreShardResponse response;
  return stub.RestoreShard(Context().get(), request, &response);
}

grpc::Status Shutdown(ParameterServer::Stub& stub) {
  ShutdownRequest request;
  ShutdownResponse response;
  return stub.Shutdown(Context().get(), request, &response);
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

TEST(SecureDefaultTest, WithoutCredentialsTheServerRefusesToStart) {
  auto [code, output] = RefusedPs("bare", {});
  EXPECT_EQ(code, 1);
  EXPECT_THAT(output,
              AllOf(HasSubstr("no TLS credentials and no job tokens"),
                    HasSubstr("psctl certs gen"), HasSubstr("psctl tokens gen"),
                    HasSubstr("--tls_dir"), HasSubstr("--token_dir"),
                    HasSubstr("--allow_unauthenticated_callers")));
  EXPECT_THAT(output, Not(HasSubstr("serving on")));
}

TEST(SecureDefaultTest, AnOpenServerListensOnLoopbackAndConfinesItsFiles) {
  Ps ps = StartPs("open", {"--allow_unauthenticated_callers"});
  EXPECT_THAT(ps.process->Output(),
              AllOf(HasSubstr("serving on 127.0.0.1:"),
                    HasSubstr("--allow_unauthenticated_callers"),
                    HasSubstr("checkpoint files only under")));
  auto stub = Stranger(ps.port);
  // A path of the caller's choice, outside the server's working directory.
  const std::string planted = TempPath("planted.data");
  grpc::Status save = SaveAt(*stub, planted);
  EXPECT_EQ(save.error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << save.error_message();
  EXPECT_THAT(save.error_message(), HasSubstr("outside the checkpoint root"));
  EXPECT_FALSE(Exists(planted));
  grpc::Status probe = RestoreFrom(*stub, "/etc/shadow");
  EXPECT_EQ(probe.error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << probe.error_message();
  EXPECT_THAT(probe.error_message(), Not(HasSubstr("bytes")));
}

TEST(SecureDefaultTest, ATokenServerRefusesStrangersAndKeepsServing) {
  ASSERT_OK_AND_ASSIGN(auto tokens, GenerateJobTokens());
  const std::string token_dir = TempPath("tokens");
  ASSERT_OK(WriteJobTokens(tokens, token_dir));
  const std::string root = TempPath("checkpoints");
  Ps ps = StartPs("tokens",
                  {"--token_dir=" + token_dir, "--checkpoint_root=" + root});
  auto stub = Stranger(ps.port);
  for (grpc::Status refused : {Shutdown(*stub), SaveAt(*stub, root + "/x.data"),
                               RestoreFrom(*stub, "/etc/shadow")}) {
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << refused.error_message();
    EXPECT_THAT(refused.error_message(), HasSubstr("no job token"));
  }
  EXPECT_FALSE(Exists(root + "/x.data"));
  // Still serving: the stranger's Shutdown did nothing.
  StatsRequest stats;
  StatsResponse response;
  grpc::Status again = stub->Stats(Context().get(), stats, &response);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  ps.process->Signal(SIGTERM);
  EXPECT_THAT(ps.process->Wait(absl::Seconds(30)), IsOkAndHolds(0))
      << ps.process->Output();
}

// Tokens without TLS travel in plaintext: such a server stays on loopback
// unless told otherwise, and one that other hosts must reach refuses to
// start, naming both ways out.
TEST(SecureDefaultTest, TokensWithoutTlsStayOnThisHost) {
  ASSERT_OK_AND_ASSIGN(auto tokens, GenerateJobTokens());
  const std::string token_dir = TempPath("plain_tokens");
  ASSERT_OK(WriteJobTokens(tokens, token_dir));
  Ps ps = StartPs("plain_tokens", {"--token_dir=" + token_dir,
                                   "--checkpoint_root=" + TempPath("plain")});
  EXPECT_THAT(ps.process->Output(), HasSubstr("serving on 127.0.0.1:"));
  ps.process->Signal(SIGTERM);
  EXPECT_THAT(ps.process->Wait(absl::Seconds(30)), IsOkAndHolds(0))
      << ps.process->Output();

  // Another host's name, even one that starts like a loopback address.
  for (const std::string host : {"ps-0.example.com", "127.ps.example.com"}) {
    auto [code, output] =
        RefusedPs("plain_remote", {"--token_dir=" + token_dir},
                  absl::StrCat(R"({"cluster": {"ps": [")", host,
                               R"(:2222"], "worker": ["w:1"]},
                        "task": {"type": "ps", "index": 0}})"));
    EXPECT_EQ(code, 1) << host;
    EXPECT_THAT(output, AllOf(HasSubstr("job tokens but no TLS"),
                              HasSubstr(host + ":2222"), HasSubstr("--tls_dir"),
                              HasSubstr("--bind_host=0.0.0.0")));
    EXPECT_THAT(output, Not(HasSubstr("serving on")));
  }
}

// An open server listens on loopback only: one that TF_CONFIG puts at
// another host's address could never be reached, so it refuses to start;
// an IPv6 loopback address is served on ::1, where its peers dial it.
TEST(SecureDefaultTest, AnOpenServerListensWhereItsPeersDialIt) {
  auto [code, output] = RefusedPs(
      "open_remote", {"--allow_unauthenticated_callers"},
      R"({"cluster": {"ps": ["ps-0.example.com:2222"], "worker": ["w:1"]},
          "task": {"type": "ps", "index": 0}})");
  EXPECT_EQ(code, 1);
  EXPECT_THAT(output, AllOf(HasSubstr("listens on loopback only"),
                            HasSubstr("ps-0.example.com:2222"),
                            HasSubstr("--bind_host=0.0.0.0")));
  EXPECT_THAT(output, Not(HasSubstr("serving on")));

  const std::string port_file = TempPath("v6.port");
  Subprocess v6({RunfilePath("ps/ps_server"), "--port_file=" + port_file,
                 "--allow_unauthenticated_callers"},
                {{"TF_CONFIG",
                  R"({"cluster": {"ps": ["[::1]:0"], "worker": ["[::1]:1"]},
                      "task": {"type": "ps", "index": 0}})"}},
                TempPath("v6.log"));
  ASSERT_OK(v6.Start());
  absl::StatusOr<int> port = WaitForPortFile(port_file, absl::Seconds(60));
  if (!port.ok() &&
      v6.Output().find("Address family not supported") != std::string::npos) {
    GTEST_SKIP() << "no IPv6 loopback here";
  }
  ASSERT_OK(port) << v6.Output();
  EXPECT_THAT(v6.Output(), HasSubstr("serving on ::1:"));
  auto stub = ParameterServer::NewStub(grpc::CreateChannel(
      absl::StrCat("[::1]:", *port), grpc::InsecureChannelCredentials()));
  StatsRequest stats;
  StatsResponse response;
  grpc::Status reached = stub->Stats(Context().get(), stats, &response);
  EXPECT_TRUE(reached.ok()) << reached.error_message();
  v6.Signal(SIGTERM);
  EXPECT_THAT(v6.Wait(absl::Seconds(30)), IsOkAndHolds(0)) << v6.Output();
}

// Values the server could only misbehave with are refused at start,
// naming the flag, instead of serving until the startup timeout.
TEST(SecureDefaultTest, ServerFlagsOutOfRangeAreRefusedAtStart) {
  const std::string file = TempPath("root_is_a_file");
  ASSERT_OK(WriteFileAtomically(file, "x"));
  for (const auto& [flag, expected] :
       std::vector<std::pair<std::string, std::string>>{
           {"--shutdown_grace_ms=-1", "--shutdown_grace_ms=-1 is out of range"},
           {"--termination_grace_s=-1",
            "--termination_grace_s=-1 is out of range"},
           {"--checkpoint_root=" + file, " is not a directory"}}) {
    auto [code, output] =
        RefusedPs("bad_flag", {"--allow_unauthenticated_callers", flag});
    EXPECT_EQ(code, 1) << flag;
    EXPECT_THAT(output, HasSubstr(expected)) << flag;
    EXPECT_THAT(output, Not(HasSubstr("serving on"))) << flag;
  }
}

TEST(SecureDefaultTest, ALooseTokenFolderIsRefusedAtStart) {
  ASSERT_OK_AND_ASSIGN(auto tokens, GenerateJobTokens());
  const std::string token_dir = TempPath("loose_tokens");
  ASSERT_OK(WriteJobTokens(tokens, token_dir));
  ASSERT_EQ(chmod(token_dir.c_str(), 0777), 0);
  auto [code, output] = RefusedPs("loose", {"--token_dir=" + token_dir});
  EXPECT_EQ(code, 1);
  EXPECT_THAT(output, AllOf(HasSubstr(token_dir), HasSubstr("0777"),
                            HasSubstr("chmod go-w")));

  ASSERT_EQ(chmod(token_dir.c_str(), 0700), 0);
  const std::string digests = token_dir + "/tokens.sha256";
  ASSERT_EQ(chmod(digests.c_str(), 0666), 0);
  auto [code2, output2] = RefusedPs("loose2", {"--token_dir=" + token_dir});
  EXPECT_EQ(code2, 1);
  EXPECT_THAT(output2, AllOf(HasSubstr(digests), HasSubstr("chmod go-w")));
}

TEST(SecureDefaultTest, RootAsTheCheckpointRootIsRefused) {
  auto [code, output] = RefusedPs(
      "slash", {"--allow_unauthenticated_callers", "--checkpoint_root=/"});
  EXPECT_EQ(code, 1);
  EXPECT_THAT(output, HasSubstr("--checkpoint_root=/ would let a peer"));
}

}  // namespace
}  // namespace psflow
