#include "client/psctl/certs_command.h"

#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

int RunCertsGen(const std::vector<std::string>& args, std::string* err) {
  Subcommands commands;
  commands.push_back(NewCertsGenCommand());
  std::vector<std::string> all = {"certs", "gen"};
  all.insert(all.end(), args.begin(), args.end());
  std::ostringstream o, e;
  const int code = RunPsctl(commands, all, o, e);
  *err = e.str();
  return code;
}

// A folder that holds a job's CA keeps it unless told: a new CA would
// lock out every task started with the old certificates.
TEST(CertsGenTest, AJobsCaIsReplacedOnlyWithOverwrite) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/certs_again");
  const std::string tf_config =
      R"(--tf_config={"cluster": {"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}, "task": {"type": "ps", "index": 0}})";
  std::string err;
  ASSERT_EQ(RunCertsGen({"--out=" + dir, tf_config}, &err), kExitOk) << err;
  ASSERT_OK_AND_ASSIGN(std::string ca_key, ReadFileToString(dir + "/ca.key"));
  EXPECT_EQ(RunCertsGen({"--out=" + dir, tf_config}, &err), kExitFailed);
  EXPECT_THAT(err, AllOf(HasSubstr(dir + " already holds a job's CA"),
                         HasSubstr("ca.key"), HasSubstr("--overwrite")));
  EXPECT_THAT(ReadFileToString(dir + "/ca.key"), IsOkAndHolds(ca_key));
  ASSERT_EQ(RunCertsGen({"--out=" + dir, tf_config, "--overwrite"}, &err),
            kExitOk)
      << err;
  EXPECT_THAT(ReadFileToString(dir + "/ca.key"), IsOkAndHolds(Not(ca_key)));
}

}  // namespace
}  // namespace psflow
