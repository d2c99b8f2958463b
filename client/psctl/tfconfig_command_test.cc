#include "client/psctl/tfconfig_command.h"

#include <sys/stat.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "common/rpc/job_tokens.h"
#include "common/rpc/transport_security.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;
using ::testing::UnorderedElementsAreArray;

class TfConfigCommandTest : public ::testing::Test {
 protected:
  TfConfigCommandTest() {
    commands_.push_back(NewTfConfigCheckCommand());
    commands_.push_back(NewTfConfigGenCommand());
  }

  int Run(std::vector<std::string> args) {
    return RunPsctl(commands_, args, out_, err_);
  }

  Subcommands commands_;
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(TfConfigCommandTest, GenPrintsAnExportLineForEveryTask) {
  EXPECT_EQ(
      Run({"tfconfig", "gen", "--ps=p", "--workers=w0,w1", "--port=2000"}),
      kExitOk)
      << err_.str();
  EXPECT_THAT(out_.str(),
              AllOf(StartsWith("# ps-0\nexport TF_CONFIG='{\"cluster\""),
                    HasSubstr("# worker-1\nexport TF_CONFIG='{\"cluster\""),
                    HasSubstr("\"p:2000\"")));
}

TEST_F(TfConfigCommandTest, GenTakesHostListsAfterASpaceToo) {
  EXPECT_EQ(Run({"tfconfig", "gen", "--ps", "p:1", "--workers", "w:2",
                 "--chief", "c:3"}),
            kExitOk)
      << err_.str();
  EXPECT_THAT(out_.str(), AllOf(HasSubstr("\"chief\": [\"c:3\"]"),
                                HasSubstr("\"ps\": [\"p:1\"]")));
}

TEST_F(TfConfigCommandTest, GenWritesOneFilePerTaskUnderOut) {
  const std::string dir =
      std::string(std::getenv("TEST_TMPDIR")) + "/tf_config";
  ASSERT_EQ(Run({"tfconfig", "gen", "--ps=p", "--workers=w", "--out=" + dir}),
            kExitOk)
      << err_.str();
  EXPECT_EQ(out_.str(), dir + "/ps-0.json\n" + dir + "/worker-0.json\n");
  absl::StatusOr<std::string> json = ReadFileToString(dir + "/worker-0.json");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json,
              HasSubstr("\"task\": {\"type\": \"worker\", \"index\": 0}"));
}

// The hosts' TF_CONFIGs and the credentials every task needs to start
// (a role binary without them refuses to), in one command.
TEST_F(TfConfigCommandTest, GenWritesTheHostsCredentialsToo) {
  const std::string dir =
      std::string(std::getenv("TEST_TMPDIR")) + "/with_credentials";
  ASSERT_EQ(
      Run({"tfconfig", "gen", "--ps=10.0.0.1", "--workers=10.0.0.2",
           "--chief=host-c", "--out=" + dir, "--credentials", "--job=mnist"}),
      kExitOk)
      << err_.str();
  EXPECT_THAT(out_.str(),
              AllOf(HasSubstr("certificates to " + dir + "/tls"),
                    HasSubstr("tokens to " + dir + "/tokens"),
                    HasSubstr(dir + "/tls/ca.key and " + dir +
                              "/tokens/admin.token: keep these off")));
  for (const char* task : {"ps-0", "worker-0", "chief-0"}) {
    const std::string tls = dir + "/tls/";
    EXPECT_TRUE(
        LoadMutualTls(tls + "ca.crt", tls + task + ".crt", tls + task + ".key")
            .ok())
        << task;
  }
  EXPECT_TRUE(LoadJobTokens(dir + "/tokens", RpcRole::kPs, true).ok());
  EXPECT_TRUE(LoadJobTokens(dir + "/tokens", RpcRole::kWorker, false).ok());
  EXPECT_TRUE(ReadFileToString(dir + "/tokens/secret.yaml").ok());
}

// A second --credentials into the same folder would lock out every task
// started with the first: refused without --overwrite, writing nothing.
TEST_F(TfConfigCommandTest, GenKeepsAJobsCredentialsUnlessToldToReplace) {
  const std::string dir =
      std::string(std::getenv("TEST_TMPDIR")) + "/credentials_again";
  const std::vector<std::string> gen = {"tfconfig",      "gen",
                                        "--ps=10.0.0.1", "--workers=10.0.0.2",
                                        "--out=" + dir,  "--credentials"};
  ASSERT_EQ(Run(gen), kExitOk) << err_.str();
  ASSERT_OK_AND_ASSIGN(std::string ca_key,
                       ReadFileToString(dir + "/tls/ca.key"));
  EXPECT_EQ(Run(gen), kExitFailed);
  EXPECT_THAT(err_.str(), AllOf(HasSubstr("already holds a job's CA"),
                                HasSubstr("--overwrite")));
  EXPECT_THAT(ReadFileToString(dir + "/tls/ca.key"), IsOkAndHolds(ca_key));
  std::vector<std::string> again = gen;
  again.push_back("--overwrite");
  EXPECT_EQ(Run(again), kExitOk) << err_.str();
  EXPECT_THAT(ReadFileToString(dir + "/tls/ca.key"),
              IsOkAndHolds(::testing::Not(ca_key)));
}

// Each task's folder holds what it needs to start and nothing else: no
// CA key, no other task's key, no token but its role's.
TEST_F(TfConfigCommandTest, GenWritesEachTasksShareApart) {
  const std::string dir =
      std::string(std::getenv("TEST_TMPDIR")) + "/task_credentials";
  ASSERT_EQ(Run({"tfconfig", "gen", "--ps=10.0.0.1", "--workers=10.0.0.2",
                 "--chief=host-c", "--evaluator=host-e", "--out=" + dir,
                 "--credentials"}),
            kExitOk)
      << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr(dir + "/tasks/<task>"));
  struct Expected {
    const char* task;
    RpcRole role;
    bool checks_callers;
    std::vector<std::string> tokens;
  };
  for (const Expected& e : std::vector<Expected>{
           {"ps-0", RpcRole::kPs, true, {"tokens.sha256"}},
           {"chief-0", RpcRole::kChief, true, {"chief.token", "tokens.sha256"}},
           {"worker-0", RpcRole::kWorker, false, {"worker.token"}},
           {"evaluator-0", RpcRole::kEvaluator, false, {"evaluator.token"}}}) {
    SCOPED_TRACE(e.task);
    const std::string task = std::string(e.task);
    const std::string tls = dir + "/tasks/" + task + "/tls/";
    const std::string tokens = dir + "/tasks/" + task + "/tokens/";
    EXPECT_OK(
        LoadMutualTls(tls + "ca.crt", tls + task + ".crt", tls + task + ".key")
            .status());
    EXPECT_OK(LoadJobTokens(tokens, e.role, e.checks_callers).status());
    EXPECT_THAT(ListDirectory(tls),
                IsOkAndHolds(UnorderedElementsAre("ca.crt", task + ".crt",
                                                  task + ".key")));
    EXPECT_THAT(ListDirectory(tokens),
                IsOkAndHolds(UnorderedElementsAreArray(e.tokens)));
    struct stat st;
    ASSERT_EQ(stat((tls + task + ".key").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600);
    ASSERT_EQ(stat((dir + "/tasks/" + task).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700);
  }
  // The role's token is the job's: the shared folder's copy.
  EXPECT_EQ(ReadFileToString(dir + "/tasks/worker-0/tokens/worker.token")
                .value_or("a"),
            ReadFileToString(dir + "/tokens/worker.token").value_or("b"));
}

TEST_F(TfConfigCommandTest, GenCredentialsNeedAnOutputFolder) {
  EXPECT_EQ(Run({"tfconfig", "gen", "--ps=p", "--workers=w", "--credentials"}),
            kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("needs --out=DIR"));
}

TEST_F(TfConfigCommandTest, GenRefusesAPortOutOfRange) {
  EXPECT_EQ(Run({"tfconfig", "gen", "--ps=p", "--workers=w", "--port=70000"}),
            kExitUsage);
  EXPECT_THAT(err_.str(),
              HasSubstr("--port=70000 is not a port; use 1..65535"));
  EXPECT_THAT(out_.str(), IsEmpty());
}

TEST_F(TfConfigCommandTest, GenRefusesABadClusterAsAUsageError) {
  EXPECT_EQ(Run({"tfconfig", "gen", "--ps=p"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("psctl tfconfig gen: a training cluster "
                                    "needs --ps and --workers"));
}

TEST_F(TfConfigCommandTest, GenRefusesAnUnknownFlagNamingIt) {
  EXPECT_EQ(Run({"tfconfig", "gen", "--ps=p", "--bogus=1"}), kExitUsage);
  EXPECT_THAT(err_.str(),
              HasSubstr("psctl tfconfig gen: unknown flag --bogus; psctl "
                        "tfconfig gen takes --chief, --ps, --workers, "
                        "--evaluator, --port, --out, --credentials, --job, "
                        "--days"));
}

TEST_F(TfConfigCommandTest, CheckRefusesAFlagOfGenNamingWhereItBelongs) {
  EXPECT_EQ(Run({"tfconfig", "check", "--workers=a,b"}), kExitUsage);
  EXPECT_THAT(err_.str(),
              HasSubstr("psctl tfconfig check: unknown flag --workers (a flag "
                        "of psctl tfconfig gen); psctl tfconfig check takes "
                        "--tf_config"));
}

TEST_F(TfConfigCommandTest, CheckReadsTheFlagBeforeTheEnvironment) {
  EXPECT_EQ(Run({"tfconfig", "check",
                 "--tf_config={\"cluster\": {\"ps\": [\"p:1\"], \"worker\": "
                 "[\"w:1\"]}, \"task\": {\"type\": \"ps\", \"index\": 0}}"}),
            kExitOk)
      << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("ps 0 at p:1"));
}

}  // namespace
}  // namespace psflow
