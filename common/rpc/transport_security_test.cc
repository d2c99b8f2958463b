// Mutual TLS with real handshakes on 127.0.0.1: a health server with the
// job's credentials answers a client of the same job, and refuses a
// plaintext client and a client whose certificate comes from another CA.
#include "common/rpc/transport_security.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/rpc/channel.h"
#include "common/rpc/health_server.h"
#include "common/rpc/job_tokens.h"
#include "common/rpc/security_flags.h"
#include "common/status_matchers.h"
#include "common/tls/certificates.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "proto/health.grpc.pb.h"

namespace psflow {
namespace {

using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::testing::AllOf;
using ::testing::HasSubstr;

// The health check's outcome through `security`: the serving status, or
// the gRPC error.
absl::Status Check(int port, const TransportSecurity& security,
                   const std::string& expected_peer = "") {
  auto stub = grpc::health::v1::Health::NewStub(
      OpenChannel(absl::StrCat("127.0.0.1:", port), security,
                  grpc::ChannelArguments(), expected_peer));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, HealthCheckRequest(), &response);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }
  return absl::OkStatus();
}

struct Job {
  PemPair ca;
  TransportSecurity server, client;
};

Job MakeJob(const std::string& name) {
  Job job;
  absl::StatusOr<PemPair> ca = MakeCertificateAuthority(name, absl::Hours(1));
  EXPECT_OK(ca);
  job.ca = *ca;
  for (auto [task, security] :
       {std::pair{"ps-0", &job.server}, std::pair{"worker-0", &job.client}}) {
    absl::StatusOr<PemPair> pair =
        MakeCertificate(job.ca, name, task, {"127.0.0.1"}, absl::Hours(1));
    EXPECT_OK(pair);
    absl::StatusOr<TransportSecurity> tls = MutualTls(
        job.ca.certificate, pair->certificate, pair->private_key, task);
    EXPECT_OK(tls);
    *security = *tls;
  }
  return job;
}

TEST(TransportSecurityTest, PeersOfOneJobTalk) {
  Job job = MakeJob("ours");
  ASSERT_OK_AND_ASSIGN(auto server,
                       StartHealthServer("127.0.0.1:0", job.server));
  EXPECT_OK(Check(server->port(), job.client));
  EXPECT_EQ(TransportSecurityName(job.client), "mtls");
}

TEST(TransportSecurityTest, APlaintextClientIsRefused) {
  Job job = MakeJob("ours");
  ASSERT_OK_AND_ASSIGN(auto server,
                       StartHealthServer("127.0.0.1:0", job.server));
  EXPECT_THAT(Check(server->port(), TransportSecurity()),
              StatusIs(absl::StatusCode::kUnavailable));
}

TEST(TransportSecurityTest, AClientFromAnotherCaIsRefused) {
  Job ours = MakeJob("ours");
  Job theirs = MakeJob("theirs");
  ASSERT_OK_AND_ASSIGN(auto server,
                       StartHealthServer("127.0.0.1:0", ours.server));
  EXPECT_THAT(Check(server->port(), theirs.client),
              StatusIs(absl::StatusCode::kUnavailable));
  // Nor does a client of ours trust a server of theirs.
  ASSERT_OK_AND_ASSIGN(auto other,
                       StartHealthServer("127.0.0.1:0", theirs.server));
  EXPECT_THAT(Check(other->port(), ours.client),
              StatusIs(absl::StatusCode::kUnavailable));
}

// The server's certificate must name the address the client dials.
TEST(TransportSecurityTest, AServerCertificateForAnotherHostIsRefused) {
  Job job = MakeJob("ours");
  ASSERT_OK_AND_ASSIGN(
      PemPair elsewhere,
      MakeCertificate(job.ca, "ours", "ps-0", {"10.9.9.9"}, absl::Hours(1)));
  ASSERT_OK_AND_ASSIGN(TransportSecurity misnamed,
                       MutualTls(job.ca.certificate, elsewhere.certificate,
                                 elsewhere.private_key, "ps-0"));
  ASSERT_OK_AND_ASSIGN(auto server, StartHealthServer("127.0.0.1:0", misnamed));
  EXPECT_THAT(Check(server->port(), job.client),
              StatusIs(absl::StatusCode::kUnavailable));
}

// Tasks sharing a host share its address in their certificates: a client
// that expects ps-0 refuses another task's certificate (a compromised
// worker listening on the server's port), and the host is still checked.
TEST(TransportSecurityTest, AClientThatExpectsATaskRefusesAnother) {
  Job job = MakeJob("ours");  // the server presents ps-0's certificate
  ASSERT_OK_AND_ASSIGN(auto server,
                       StartHealthServer("127.0.0.1:0", job.server));
  EXPECT_OK(Check(server->port(), job.client, "ps-0"));
  EXPECT_THAT(Check(server->port(), job.client, "ps-1"),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("presents the certificate of ps-0, not of "
                                 "ps-1")));
  // A worker's certificate where ps-0 is expected.
  ASSERT_OK_AND_ASSIGN(
      PemPair worker, MakeCertificate(job.ca, "ours", "worker-1", {"127.0.0.1"},
                                      absl::Hours(1)));
  ASSERT_OK_AND_ASSIGN(TransportSecurity impostor,
                       MutualTls(job.ca.certificate, worker.certificate,
                                 worker.private_key, "worker-1"));
  ASSERT_OK_AND_ASSIGN(auto fake, StartHealthServer("127.0.0.1:0", impostor));
  EXPECT_THAT(Check(fake->port(), job.client, "ps-0"),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_OK(Check(fake->port(), job.client));  // any task of the job
  // ps-0's certificate for another host is refused still.
  ASSERT_OK_AND_ASSIGN(
      PemPair elsewhere,
      MakeCertificate(job.ca, "ours", "ps-0", {"10.9.9.9"}, absl::Hours(1)));
  ASSERT_OK_AND_ASSIGN(TransportSecurity misplaced,
                       MutualTls(job.ca.certificate, elsewhere.certificate,
                                 elsewhere.private_key, "ps-0"));
  ASSERT_OK_AND_ASSIGN(auto away, StartHealthServer("127.0.0.1:0", misplaced));
  EXPECT_THAT(Check(away->port(), job.client, "ps-0"),
              StatusIs(absl::StatusCode::kUnavailable));
}

// Private to this user, as psctl certs gen writes keys (credential_files.h).
std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  std::ofstream(path) << text;
  EXPECT_EQ(chmod(path.c_str(), 0600), 0);
  return path;
}

SecurityIdentity Who(const std::string& task) {
  SecurityIdentity identity;
  identity.name = task;
  identity.role = task.rfind("ps-", 0) == 0      ? RpcRole::kPs
                  : task.rfind("chief-", 0) == 0 ? RpcRole::kChief
                                                 : RpcRole::kWorker;
  return identity;
}

TEST(SecurityFlagsTest, ATlsDirectoryGivesTheTasksOwnFiles) {
  Job job = MakeJob("ours");
  ASSERT_OK_AND_ASSIGN(
      PemPair worker, MakeCertificate(job.ca, "ours", "worker-1", {"127.0.0.1"},
                                      absl::Hours(1)));
  const std::string dir = std::getenv("TEST_TMPDIR");
  WriteFile("ca.crt", job.ca.certificate);
  WriteFile("worker-1.crt", worker.certificate);
  WriteFile("worker-1.key", worker.private_key);
  SecuritySettings settings;
  settings.tls_dir = dir;
  ASSERT_OK_AND_ASSIGN(TransportSecurity tls,
                       ResolveTransportSecurity(settings, Who("worker-1"), ""));
  EXPECT_EQ(tls.mode, TransportSecurity::Mode::kMutualTls);
  EXPECT_THAT(tls.source, HasSubstr("worker-1.crt"));
  // Another task's name looks for its own files.
  EXPECT_THAT(ResolveTransportSecurity(settings, Who("worker-2"), ""),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("worker-2.crt")));
}

TEST(SecurityFlagsTest, MistakesAreNamed) {
  SecuritySettings none;
  ASSERT_OK_AND_ASSIGN(TransportSecurity plain,
                       ResolveTransportSecurity(none, Who("ps-0"), "grpc"));
  EXPECT_EQ(plain.mode, TransportSecurity::Mode::kInsecure);
  EXPECT_THAT(
      ResolveTransportSecurity(none, Who("ps-0"), "grpc+tls"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("requires TLS")));
  SecuritySettings tls_without_files;
  tls_without_files.mode = "mtls";
  EXPECT_THAT(
      ResolveTransportSecurity(tls_without_files, Who("ps-0"), ""),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--tls_dir")));
  SecuritySettings unknown;
  unknown.mode = "tls13";
  EXPECT_THAT(ResolveTransportSecurity(unknown, Who("ps-0"), ""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--transport_security=tls13")));
  SecuritySettings mixed;
  mixed.mode = "insecure";
  mixed.tls_dir = "/somewhere";
  EXPECT_THAT(ResolveTransportSecurity(mixed, Who("ps-0"), ""),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // A key that is not the certificate's is caught at start.
  Job job = MakeJob("ours");
  ASSERT_OK_AND_ASSIGN(
      PemPair a,
      MakeCertificate(job.ca, "ours", "ps-0", {"127.0.0.1"}, absl::Hours(1)));
  ASSERT_OK_AND_ASSIGN(
      PemPair b,
      MakeCertificate(job.ca, "ours", "ps-1", {"127.0.0.1"}, absl::Hours(1)));
  EXPECT_THAT(
      MutualTls(job.ca.certificate, a.certificate, b.private_key, "the test"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("does not belong")));
}

// A task started with another task's pair, or a certificate for another
// host than TF_CONFIG gives it, is refused at start, not found out later
// in handshakes (or never, where tasks share a host).
TEST(SecurityFlagsTest, ATasksCertificateMustBeItsOwn) {
  Job job = MakeJob("ours");
  ASSERT_OK_AND_ASSIGN(
      PemPair worker, MakeCertificate(job.ca, "ours", "worker-1", {"127.0.0.1"},
                                      absl::Hours(1)));
  SecuritySettings settings;
  settings.ca = WriteFile("own_ca.crt", job.ca.certificate);
  settings.cert = WriteFile("borrowed.crt", worker.certificate);
  settings.key = WriteFile("borrowed.key", worker.private_key);
  SecurityIdentity ps = Who("ps-0");
  EXPECT_THAT(ResolveTransportSecurity(settings, ps, ""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("named \"worker-1\", not \"ps-0\"")));
  SecurityIdentity elsewhere = Who("worker-1");
  elsewhere.host = "10.9.9.9";
  EXPECT_THAT(ResolveTransportSecurity(settings, elsewhere, ""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("does not cover 10.9.9.9")));
  elsewhere.host = "127.0.0.1";
  EXPECT_OK(ResolveTransportSecurity(settings, elsewhere, ""));
}

// A key appended to a certificate file (readable by all, in every pod)
// would give it away: refused, whichever public file holds it.
TEST(SecurityFlagsTest, APublicFileHoldingAPrivateKeyIsRefused) {
  Job job = MakeJob("ours");
  ASSERT_OK_AND_ASSIGN(
      PemPair worker, MakeCertificate(job.ca, "ours", "worker-1", {"127.0.0.1"},
                                      absl::Hours(1)));
  const std::string key = WriteFile("leak-worker.key", worker.private_key);
  const std::string cert = WriteFile("leak-worker.crt", worker.certificate);
  const std::string ca = WriteFile("leak-ca.crt", job.ca.certificate);
  const std::string ca_and_key =
      WriteFile("leak-ca-and-key.crt", job.ca.certificate + job.ca.private_key);
  const std::string cert_and_key = WriteFile(
      "leak-worker-and-key.crt", worker.certificate + worker.private_key);
  ASSERT_OK(LoadMutualTls(ca, cert, key));
  EXPECT_THAT(LoadMutualTls(ca_and_key, cert, key),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("CA certificate"),
                             HasSubstr("holds a private key too"))));
  EXPECT_THAT(LoadMutualTls(ca, cert_and_key, key),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("holds a private key too")));
}

TEST(SecurityFlagsTest, ATokenDirectoryGivesEachRoleWhatItNeeds) {
  ASSERT_OK_AND_ASSIGN(auto tokens, GenerateJobTokens());
  const std::string dir =
      absl::StrCat(std::getenv("TEST_TMPDIR"), "/flag_tokens");
  ASSERT_OK(WriteJobTokens(tokens, dir));
  SecuritySettings settings;
  settings.token_dir = dir;
  // A parameter server checks callers and presents nothing.
  ASSERT_OK_AND_ASSIGN(TransportSecurity ps,
                       ResolveTransportSecurity(settings, Who("ps-0"), ""));
  EXPECT_TRUE(ps.tokens.checks());
  EXPECT_FALSE(ps.tokens.presents());
  // A worker presents its own token and checks nobody.
  ASSERT_OK_AND_ASSIGN(TransportSecurity worker,
                       ResolveTransportSecurity(settings, Who("worker-1"), ""));
  EXPECT_EQ(worker.tokens.own, tokens.at(RpcRole::kWorker));
  EXPECT_FALSE(worker.tokens.checks());
  // The chief does both.
  ASSERT_OK_AND_ASSIGN(TransportSecurity chief,
                       ResolveTransportSecurity(settings, Who("chief-0"), ""));
  EXPECT_EQ(chief.tokens.own, tokens.at(RpcRole::kChief));
  EXPECT_TRUE(chief.tokens.checks());
  // A directory without the role's token names the file.
  settings.token_dir = std::getenv("TEST_TMPDIR");
  EXPECT_THAT(ResolveTransportSecurity(settings, Who("worker-1"), ""),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("worker.token")));
}

}  // namespace
}  // namespace psflow
