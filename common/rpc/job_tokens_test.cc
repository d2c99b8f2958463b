#include "common/rpc/job_tokens.h"

#include <sys/stat.h>

#include <fstream>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

std::string NewDir(const std::string& name) {
  return absl::StrCat(testing::TempDir(), "/job_tokens_", name);
}

// Private to this user, as credentials must be (credential_files.h).
void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
  EXPECT_EQ(chmod(path.c_str(), 0600), 0);
}

int Mode(const std::string& path) {
  struct stat info;
  EXPECT_EQ(stat(path.c_str(), &info), 0) << path;
  return info.st_mode & 0777;
}

TEST(JobTokensTest, EveryCallingRoleGetsItsOwnFreshToken) {
  absl::StatusOr<std::map<RpcRole, std::string>> a = GenerateJobTokens();
  absl::StatusOr<std::map<RpcRole, std::string>> b = GenerateJobTokens();
  ASSERT_OK(a);
  ASSERT_OK(b);
  std::set<std::string> seen;
  for (RpcRole role : kCallingRoles) {
    ASSERT_EQ(a->count(role), 1u) << RpcRoleName(role);
    EXPECT_EQ(a->at(role).size(), 64u);
    seen.insert(a->at(role));
    seen.insert(b->at(role));
  }
  EXPECT_EQ(a->count(RpcRole::kPs), 0u);  // parameter servers call nobody
  EXPECT_EQ(seen.size(), 2 * std::size(kCallingRoles));
}

TEST(JobTokensTest, WrittenPrivatelyAndLoadedPerRole) {
  absl::StatusOr<std::map<RpcRole, std::string>> tokens = GenerateJobTokens();
  ASSERT_OK(tokens);
  const std::string dir = NewDir("written");
  ASSERT_OK(WriteJobTokens(*tokens, dir));
  EXPECT_EQ(Mode(dir), 0700);
  EXPECT_EQ(Mode(dir + "/worker.token"), 0600);
  EXPECT_EQ(Mode(dir + "/tokens.sha256"), 0644);

  // A worker presents its token and checks nobody.
  absl::StatusOr<JobTokens> worker =
      LoadJobTokens(dir, RpcRole::kWorker, /*checks_callers=*/false);
  ASSERT_OK(worker);
  EXPECT_EQ(worker->own, tokens->at(RpcRole::kWorker));
  EXPECT_FALSE(worker->checks());

  // A parameter server presents nothing and knows every role's token.
  absl::StatusOr<JobTokens> ps =
      LoadJobTokens(dir, RpcRole::kPs, /*checks_callers=*/true);
  ASSERT_OK(ps);
  EXPECT_FALSE(ps->presents());
  for (RpcRole role : kCallingRoles) {
    EXPECT_EQ(RoleOfToken(*ps, tokens->at(role)), role) << RpcRoleName(role);
  }
  EXPECT_EQ(RoleOfToken(*ps, ""), std::nullopt);
  EXPECT_EQ(RoleOfToken(*ps, std::string(64, '0')), std::nullopt);
  // The digests file holds no token.
  absl::StatusOr<std::string> digests = [&]() -> absl::StatusOr<std::string> {
    std::ifstream in(dir + "/tokens.sha256");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  for (const auto& [role, token] : *tokens) {
    EXPECT_THAT(*digests, Not(HasSubstr(token)));
  }
}

TEST(JobTokensTest, MissingFilesNameTheFlagThatSuppliesThem) {
  const std::string dir = NewDir("missing");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  absl::Status status = LoadJobTokens(dir, RpcRole::kWorker, false).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr(dir + "/worker.token"));
  EXPECT_THAT(status.message(), HasSubstr("--token_dir"));
  status = LoadJobTokens(dir, RpcRole::kPs, true).status();
  EXPECT_THAT(status.message(), HasSubstr("tokens.sha256"));
}

TEST(JobTokensTest, MalformedFilesAreRefusedWithoutEchoingThem) {
  const std::string dir = NewDir("malformed");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  const std::string secretish = "hunter2-my-password";
  WriteText(dir + "/chief.token", secretish + "\n");
  absl::Status status = LoadJobTokens(dir, RpcRole::kChief, false).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), Not(HasSubstr(secretish)));

  // A huge file is refused before it is read.
  WriteText(dir + "/chief.token", std::string(1 << 20, 'a'));
  EXPECT_EQ(LoadJobTokens(dir, RpcRole::kChief, false).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A directory where a file belongs.
  ASSERT_EQ(mkdir((dir + "/admin.token").c_str(), 0700), 0);
  EXPECT_EQ(LoadJobTokens(dir, RpcRole::kAdmin, false).status().code(),
            absl::StatusCode::kInvalidArgument);

  for (const std::string& digests :
       {std::string("worker abc\n"),
        std::string("nobody ") + std::string(64, 'a'),
        std::string("worker ") + std::string(64, 'a') + "\nworker " +
            std::string(64, 'b'),
        std::string("# only a comment\n")}) {
    WriteText(dir + "/tokens.sha256", digests);
    EXPECT_EQ(LoadJobTokens(dir, RpcRole::kPs, true).status().code(),
              absl::StatusCode::kInvalidArgument)
        << digests;
  }
}

// One token for two roles: its caller could not be told apart, and would
// act as whichever role came last (the chief taken for a worker).
TEST(JobTokensTest, OneTokenForTwoRolesIsRefused) {
  const std::string dir = NewDir("shared_digest");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  const std::string digest(64, 'c');
  WriteText(dir + "/tokens.sha256", "chief " + digest + "\nworker " +
                                        std::string(64, 'd') + "\nadmin " +
                                        digest + "\n");
  EXPECT_THAT(
      LoadJobTokens(dir, RpcRole::kPs, true).status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("line 3"), HasSubstr("the same token as"))));
}

}  // namespace
}  // namespace psflow
