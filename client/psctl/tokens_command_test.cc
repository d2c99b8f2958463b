#include "client/psctl/tokens_command.h"

#include <sstream>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/rpc/job_tokens.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

int RunTokensGen(const std::vector<std::string>& args, std::string* out,
                 std::string* err) {
  Subcommands commands;
  commands.push_back(NewTokensGenCommand());
  std::vector<std::string> all = {"tokens", "gen"};
  all.insert(all.end(), args.begin(), args.end());
  std::ostringstream o, e;
  const int code = RunPsctl(commands, all, o, e);
  *out = o.str();
  *err = e.str();
  return code;
}

TEST(TokensGenTest, WritesTokensDigestsAndASecretWithoutTheAdminToken) {
  const std::string dir = absl::StrCat(testing::TempDir(), "/tokens_gen");
  std::string out, err;
  ASSERT_EQ(RunTokensGen({"--out=" + dir, "--namespace=ml"}, &out, &err),
            kExitOk)
      << err;
  EXPECT_THAT(out, HasSubstr("--token_dir=" + dir));

  // Every role's files load, and the digests admit each role's token.
  absl::StatusOr<JobTokens> ps = LoadJobTokens(dir, RpcRole::kPs, true);
  ASSERT_OK(ps);
  for (RpcRole role : kCallingRoles) {
    absl::StatusOr<JobTokens> own = LoadJobTokens(dir, role, false);
    ASSERT_OK(own);
    EXPECT_EQ(RoleOfToken(*ps, own->own), role);
  }

  ASSERT_OK_AND_ASSIGN(std::string secret,
                       ReadFileToString(dir + "/secret.yaml"));
  EXPECT_THAT(secret, HasSubstr("kind: Secret"));
  EXPECT_THAT(secret, HasSubstr("name: psflow-tokens"));
  EXPECT_THAT(secret, HasSubstr("namespace: ml"));
  ASSERT_OK_AND_ASSIGN(JobTokens worker,
                       LoadJobTokens(dir, RpcRole::kWorker, false));
  ASSERT_OK_AND_ASSIGN(JobTokens admin,
                       LoadJobTokens(dir, RpcRole::kAdmin, false));
  EXPECT_THAT(secret,
              HasSubstr(absl::StrCat("worker.token: ",
                                     absl::Base64Escape(worker.own + "\n"))));
  EXPECT_THAT(secret, Not(HasSubstr("admin.token")));
  EXPECT_THAT(secret, Not(HasSubstr(absl::Base64Escape(admin.own + "\n"))));
}

// A folder that holds a job's tokens keeps them unless told: new ones
// would lock out every task started with the old.
TEST(TokensGenTest, AJobsTokensAreReplacedOnlyWithOverwrite) {
  const std::string dir = absl::StrCat(testing::TempDir(), "/tokens_again");
  std::string out, err;
  ASSERT_EQ(RunTokensGen({"--out=" + dir}, &out, &err), kExitOk) << err;
  ASSERT_OK_AND_ASSIGN(std::string digests,
                       ReadFileToString(dir + "/" + kTokenDigestsFile));
  EXPECT_EQ(RunTokensGen({"--out=" + dir}, &out, &err), kExitFailed);
  EXPECT_THAT(err, AllOf(HasSubstr(dir + " already holds a job's tokens"),
                         HasSubstr("chief.token"), HasSubstr("--overwrite")));
  EXPECT_THAT(ReadFileToString(dir + "/" + kTokenDigestsFile),
              IsOkAndHolds(digests));
  ASSERT_EQ(RunTokensGen({"--out=" + dir, "--overwrite"}, &out, &err), kExitOk)
      << err;
  EXPECT_THAT(ReadFileToString(dir + "/" + kTokenDigestsFile),
              IsOkAndHolds(Not(digests)));
}

TEST(TokensGenTest, OutIsRequired) {
  std::string out, err;
  EXPECT_EQ(RunTokensGen({}, &out, &err), kExitUsage);
  EXPECT_THAT(err, HasSubstr("--out=DIR is required"));
}

}  // namespace
}  // namespace psflow
