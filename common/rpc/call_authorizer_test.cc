// CallAuthorizer over real gRPC connections on 127.0.0.1: a generic server
// whose methods are each for some roles answers callers that present job
// tokens, certificates, both or neither.
#include "common/rpc/call_authorizer.h"

#include <future>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/rpc/channel.h"
#include "common/rpc/job_tokens.h"
#include "common/rpc/server_runner.h"
#include "common/status_matchers.h"
#include "common/tls/certificates.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// "/t/ChiefOnly" is for the chief; "/t/Pull" for a worker or an evaluator;
// anything else for everyone. Answers the role it saw ("open" when none),
// or for "/t/Name" the caller's name.
class AuthorizedService final : public grpc::CallbackGenericService {
 public:
  explicit AuthorizedService(const TransportSecurity& security)
      : authorizer_(security) {}

  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    class Reactor final : public grpc::ServerGenericBidiReactor {
     public:
      Reactor(const CallAuthorizer& authorizer,
              grpc::GenericCallbackServerContext* context) {
        const std::string& method = context->method();
        const RoleSet allowed =
            method == "/t/ChiefOnly" ? RoleSet{RpcRole::kChief}
            : method == "/t/Pull"
                ? RoleSet{RpcRole::kWorker, RpcRole::kEvaluator}
                : RoleSet{RpcRole::kChief, RpcRole::kWorker,
                          RpcRole::kEvaluator, RpcRole::kAdmin};
        absl::StatusOr<CallAuthorizer::Caller> caller =
            authorizer.AuthorizeCaller(*context, allowed, method);
        if (!caller.ok()) {
          Finish(grpc::Status(
              static_cast<grpc::StatusCode>(caller.status().code()),
              std::string(caller.status().message())));
          return;
        }
        // "/t/Name" answers the caller's name, "[]" for none.
        const std::string name =
            method == "/t/Name"        ? absl::StrCat("[", caller->name, "]")
            : caller->role.has_value() ? std::string(RpcRoleName(*caller->role))
                                       : "open";
        grpc::Slice slice(name);
        answer_ = grpc::ByteBuffer(&slice, 1);
        StartWriteAndFinish(&answer_, grpc::WriteOptions(), grpc::Status::OK);
      }
      void OnDone() override { delete this; }

     private:
      grpc::ByteBuffer answer_;
    };
    return new Reactor(authorizer_, context);
  }

 private:
  const CallAuthorizer authorizer_;
};

class Server {
 public:
  explicit Server(const TransportSecurity& security)
      : service_(std::make_shared<AuthorizedService>(security)) {
    ServerOptions options;
    options.listen_address = "127.0.0.1:0";
    options.security = security;
    options.generic_service = service_.get();
    absl::StatusOr<std::unique_ptr<ServerRunner>> runner =
        ServerRunner::Start(options);
    EXPECT_OK(runner);
    runner_ = *std::move(runner);
  }

  // The role the server saw, or the error it answered.
  absl::StatusOr<std::string> Call(const TransportSecurity& client,
                                   const std::string& method,
                                   const std::string& authorization = "") {
    grpc::GenericStub stub(
        OpenChannel(absl::StrCat("127.0.0.1:", runner_->port()), client));
    grpc::ClientContext context;
    // A header written by another client than ours.
    if (!authorization.empty()) {
      context.AddMetadata(kTokenMetadataKey, authorization);
    }
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    grpc::Slice slice(std::string("request"));
    grpc::ByteBuffer request(&slice, 1), response;
    std::promise<grpc::Status> done;
    stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                   [&done](grpc::Status status) { done.set_value(status); });
    grpc::Status status = done.get_future().get();
    if (!status.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          status.error_message());
    }
    std::vector<grpc::Slice> slices;
    EXPECT_TRUE(response.Dump(&slices).ok());
    std::string text;
    for (const grpc::Slice& s : slices) {
      text.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    return text;
  }

 private:
  std::shared_ptr<AuthorizedService> service_;
  std::unique_ptr<ServerRunner> runner_;
};

std::map<RpcRole, std::string> Tokens() {
  absl::StatusOr<std::map<RpcRole, std::string>> tokens = GenerateJobTokens();
  EXPECT_OK(tokens);
  return *tokens;
}

// What a server of a job with `tokens` checks (as LoadJobTokens reads it).
JobTokens Checking(const std::map<RpcRole, std::string>& tokens) {
  const std::string dir = absl::StrCat(testing::TempDir(), "/tokens_",
                                       reinterpret_cast<uintptr_t>(&tokens));
  EXPECT_OK(WriteJobTokens(tokens, dir));
  absl::StatusOr<JobTokens> loaded =
      LoadJobTokens(dir, RpcRole::kPs, /*checks_callers=*/true);
  EXPECT_OK(loaded);
  return *loaded;
}

TransportSecurity Presenting(const std::string& token) {
  TransportSecurity security;
  security.tokens.own = token;
  return security;
}

TEST(CallAuthorizerTest, TokensNameTheCallersRole) {
  const auto tokens = Tokens();
  TransportSecurity server_security;
  server_security.tokens = Checking(tokens);
  Server server(server_security);

  EXPECT_THAT(
      server.Call(Presenting(tokens.at(RpcRole::kChief)), "/t/ChiefOnly"),
      IsOkAndHolds(std::string("chief")));
  EXPECT_THAT(server.Call(Presenting(tokens.at(RpcRole::kWorker)), "/t/Pull"),
              IsOkAndHolds(std::string("worker")));
  EXPECT_THAT(
      server.Call(Presenting(tokens.at(RpcRole::kEvaluator)), "/t/Pull"),
      IsOkAndHolds(std::string("evaluator")));
  EXPECT_THAT(server.Call(Presenting(tokens.at(RpcRole::kAdmin)), "/t/Any"),
              IsOkAndHolds(std::string("admin")));
}

TEST(CallAuthorizerTest, AWorkerCannotCallTheChiefsMethods) {
  const auto tokens = Tokens();
  TransportSecurity server_security;
  server_security.tokens = Checking(tokens);
  Server server(server_security);
  absl::StatusOr<std::string> denied =
      server.Call(Presenting(tokens.at(RpcRole::kWorker)), "/t/ChiefOnly");
  EXPECT_EQ(denied.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(denied.status().message(),
              HasSubstr("/t/ChiefOnly is for the chief only; the caller's "
                        "role is worker"));
  // An admin tool may not pull.
  EXPECT_EQ(server.Call(Presenting(tokens.at(RpcRole::kAdmin)), "/t/Pull")
                .status()
                .code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(CallAuthorizerTest, NoTokenOrAWrongOneIsUnauthenticated) {
  const auto tokens = Tokens();
  TransportSecurity server_security;
  server_security.tokens = Checking(tokens);
  Server server(server_security);

  absl::StatusOr<std::string> none = server.Call(TransportSecurity(), "/t/Any");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(none.status().message(), HasSubstr("no job token"));
  EXPECT_THAT(none.status().message(), HasSubstr("--token_dir"));

  // Another job's token, of the right form: refused, and never echoed.
  const auto others = Tokens();
  const std::string foreign = others.at(RpcRole::kChief);
  absl::StatusOr<std::string> wrong =
      server.Call(Presenting(foreign), "/t/Any");
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(wrong.status().message(), HasSubstr("not one of this job's"));
  EXPECT_THAT(wrong.status().message(), Not(HasSubstr(foreign)));

  // An oversized value is refused before it is hashed.
  absl::StatusOr<std::string> oversized =
      server.Call(Presenting(std::string(2000, 'a')), "/t/Any");
  EXPECT_EQ(oversized.status().code(), absl::StatusCode::kUnauthenticated);
}

// RFC 7235: the scheme is case-insensitive; RFC 6750: one or more spaces.
TEST(CallAuthorizerTest, TheBearerSchemeIsMatchedWithoutRegardToCase) {
  const auto tokens = Tokens();
  TransportSecurity server_security;
  server_security.tokens = Checking(tokens);
  Server server(server_security);
  const std::string worker = tokens.at(RpcRole::kWorker);
  for (const std::string scheme :
       {"Bearer ", "bearer ", "BEARER ", "bEaReR   "}) {
    EXPECT_THAT(server.Call(TransportSecurity(), "/t/Pull", scheme + worker),
                IsOkAndHolds(std::string("worker")))
        << scheme;
  }
  for (const std::string& value : std::vector<std::string>{
           "Basic " + worker, "Bearer" + worker, "Bearer ", worker}) {
    EXPECT_EQ(
        server.Call(TransportSecurity(), "/t/Pull", value).status().code(),
        absl::StatusCode::kUnauthenticated)
        << value.substr(0, 8);
  }
}

TEST(CallAuthorizerTest, AnOpenServerAdmitsEveryone) {
  Server server{TransportSecurity()};
  EXPECT_THAT(server.Call(TransportSecurity(), "/t/ChiefOnly"),
              IsOkAndHolds(std::string("open")));
  EXPECT_THAT(server.Call(Presenting("anything"), "/t/ChiefOnly"),
              IsOkAndHolds(std::string("open")));
}

// Mutual TLS: certificates of one job's CA for the given names.
struct Pki {
  PemPair ca;
  TransportSecurity For(const std::string& name) const {
    absl::StatusOr<PemPair> pair =
        MakeCertificate(ca, "job", name, {"127.0.0.1"}, absl::Hours(1));
    EXPECT_OK(pair);
    absl::StatusOr<TransportSecurity> tls =
        MutualTls(ca.certificate, pair->certificate, pair->private_key, name);
    EXPECT_OK(tls);
    return *tls;
  }
};

Pki MakePki() {
  absl::StatusOr<PemPair> ca = MakeCertificateAuthority("job", absl::Hours(1));
  EXPECT_OK(ca);
  return Pki{*ca};
}

TEST(CallAuthorizerTest, CertificatesNameTheCallersRole) {
  const Pki pki = MakePki();
  Server server(pki.For("ps-0"));
  EXPECT_THAT(server.Call(pki.For("chief-0"), "/t/ChiefOnly"),
              IsOkAndHolds(std::string("chief")));
  EXPECT_THAT(server.Call(pki.For("worker-3"), "/t/Pull"),
              IsOkAndHolds(std::string("worker")));
  EXPECT_THAT(server.Call(pki.For("psctl"), "/t/Any"),
              IsOkAndHolds(std::string("admin")));
  EXPECT_EQ(server.Call(pki.For("worker-0"), "/t/ChiefOnly").status().code(),
            absl::StatusCode::kPermissionDenied);
  // Signed by the job's CA but naming no task: no rights at all.
  absl::StatusOr<std::string> stranger =
      server.Call(pki.For("mallory"), "/t/Any");
  EXPECT_EQ(stranger.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(stranger.status().message(), HasSubstr("\"mallory\""));
}

TEST(CallAuthorizerTest, WorkerZeroIsTheChiefWithoutAChiefJob) {
  const Pki pki = MakePki();
  TransportSecurity server_security = pki.For("ps-0");
  server_security.chief_task = TaskId{TaskType::kWorker, 0};
  Server server(server_security);
  EXPECT_THAT(server.Call(pki.For("worker-0"), "/t/ChiefOnly"),
              IsOkAndHolds(std::string("chief")));
  EXPECT_EQ(server.Call(pki.For("worker-1"), "/t/ChiefOnly").status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(CallAuthorizerTest, CertificateAndTokenMustAgree) {
  const Pki pki = MakePki();
  const auto tokens = Tokens();
  TransportSecurity server_security = pki.For("ps-0");
  server_security.tokens = Checking(tokens);
  Server server(server_security);

  TransportSecurity worker = pki.For("worker-1");
  worker.tokens.own = tokens.at(RpcRole::kWorker);
  EXPECT_THAT(server.Call(worker, "/t/Pull"),
              IsOkAndHolds(std::string("worker")));

  // A worker's certificate with the chief's token: refused.
  TransportSecurity impostor = pki.For("worker-1");
  impostor.tokens.own = tokens.at(RpcRole::kChief);
  absl::StatusOr<std::string> denied = server.Call(impostor, "/t/ChiefOnly");
  EXPECT_EQ(denied.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(denied.status().message(),
              HasSubstr("certificate says role worker"));

  // The certificate alone is not enough when the job has tokens.
  EXPECT_EQ(server.Call(pki.For("chief-0"), "/t/ChiefOnly").status().code(),
            absl::StatusCode::kUnauthenticated);
}

// The caller's name, whom a shared-memory session belongs to: the
// certificate's task under mutual TLS, else the token's role, else none.
TEST(CallAuthorizerTest, TheCallersNameIsItsMostSpecificIdentity) {
  const Pki pki = MakePki();
  const auto tokens = Tokens();
  {
    TransportSecurity server_security;
    server_security.tokens = Checking(tokens);
    Server server(server_security);
    EXPECT_THAT(server.Call(Presenting(tokens.at(RpcRole::kWorker)), "/t/Name"),
                IsOkAndHolds(std::string("[worker]")));
  }
  {
    Server server(pki.For("ps-0"));
    EXPECT_THAT(server.Call(pki.For("worker-3"), "/t/Name"),
                IsOkAndHolds(std::string("[worker-3]")));
  }
  {
    TransportSecurity server_security = pki.For("ps-0");
    server_security.tokens = Checking(tokens);
    Server server(server_security);
    TransportSecurity worker = pki.For("worker-1");
    worker.tokens.own = tokens.at(RpcRole::kWorker);
    EXPECT_THAT(server.Call(worker, "/t/Name"),
                IsOkAndHolds(std::string("[worker-1]")));
  }
  Server open{TransportSecurity()};
  EXPECT_THAT(open.Call(TransportSecurity(), "/t/Name"),
              IsOkAndHolds(std::string("[]")));
}

}  // namespace
}  // namespace psflow
