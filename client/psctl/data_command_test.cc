#include "client/psctl/data_command.h"

#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

int RunSynthCtr(const std::vector<std::string>& args, std::string* out,
                std::string* err) {
  Subcommands commands;
  commands.push_back(NewDataSynthCtrCommand());
  std::vector<std::string> all = {"data", "synth-ctr"};
  all.insert(all.end(), args.begin(), args.end());
  std::ostringstream o, e;
  const int code = RunPsctl(commands, all, o, e);
  *out = o.str();
  *err = e.str();
  return code;
}

std::string Dir(const std::string& name) {
  return absl::StrCat(testing::TempDir(), "/", name);
}

TEST(DataSynthCtrTest, WritesADataSetAndPrintsThePlantedAuc) {
  const std::string dir = Dir("synth");
  const std::vector<std::string> args = {"--out_dir=" + dir,
                                         "--train_examples=3000",
                                         "--test_examples=2000",
                                         "--fields=5",
                                         "--dense=2",
                                         "--vocabulary=1000",
                                         "--zipf=1.2",
                                         "--weight_scale=0.5",
                                         "--gzip"};
  std::string out, err;
  ASSERT_EQ(RunSynthCtr(args, &out, &err), kExitOk) << err;
  EXPECT_THAT(out, HasSubstr("wrote 3000 training examples to " + dir +
                             "/train.txt.gz and 2000 held-out examples"));
  EXPECT_THAT(out, HasSubstr("columns: 2 integer, 5 categorical (vocabularies "
                             "4 to 1000, zipf 1.2); 5% of values missing"));
  EXPECT_THAT(out, MatchesRegex("(.|\n)*planted model AUC on the held-out "
                                "set: 0\\.[0-9]{4} \\(the best any model can "
                                "do\\)\n(.|\n)*"));
  EXPECT_TRUE(PathExists(dir + "/planted.json"));
  EXPECT_TRUE(PathExists(dir + "/test.txt.gz"));

  // Once more: the data set is there.
  EXPECT_EQ(RunSynthCtr(args, &out, &err), kExitFailed);
  EXPECT_THAT(
      err, HasSubstr("psctl data synth-ctr: " + dir + "/planted.json exists"));
  EXPECT_THAT(err, HasSubstr("--overwrite"));
  std::vector<std::string> again = args;
  again.push_back("--overwrite");
  EXPECT_EQ(RunSynthCtr(again, &out, &err), kExitOk) << err;
}

TEST(DataSynthCtrTest, OutDirIsRequired) {
  std::string out, err;
  EXPECT_EQ(RunSynthCtr({"--train_examples=10"}, &out, &err), kExitUsage);
  EXPECT_THAT(err, HasSubstr("--out_dir=DIR is required"));
}

TEST(DataSynthCtrTest, BadValuesAreUsageErrors) {
  const std::string dir = "--out_dir=" + Dir("bad");
  std::string out, err;
  EXPECT_EQ(RunSynthCtr({dir, "--zipf=steep"}, &out, &err), kExitUsage);
  EXPECT_THAT(err, HasSubstr("psctl data synth-ctr: --zipf=steep is not a "
                             "number"));
  EXPECT_EQ(RunSynthCtr({dir, "--missing=1"}, &out, &err), kExitUsage);
  EXPECT_THAT(err, HasSubstr("the missing-value probability is 1; use 0 to "
                             "0.99 (--missing)"));
  EXPECT_EQ(RunSynthCtr({dir, "--train_examples=0"}, &out, &err), kExitUsage);
  EXPECT_THAT(err, HasSubstr("training examples is 0"));
  EXPECT_EQ(RunSynthCtr({dir, "--seed=-3"}, &out, &err), kExitUsage);
  EXPECT_THAT(err, HasSubstr("--seed=-3 is negative"));
  EXPECT_EQ(RunSynthCtr({dir, "--ps=2"}, &out, &err), kExitUsage);
  EXPECT_THAT(err, HasSubstr("unknown flag --ps"));
  EXPECT_FALSE(PathExists(Dir("bad")));
}

TEST(DataSynthCtrTest, HelpListsTheFlagsWithTheirDefaults) {
  std::string out, err;
  EXPECT_EQ(RunSynthCtr({"--help"}, &out, &err), kExitOk);
  EXPECT_THAT(out, HasSubstr("--zipf=STRING (default \"1.1\")"));
  EXPECT_THAT(out, HasSubstr("--train_examples=INT (default 200000)"));
  EXPECT_THAT(out, HasSubstr("--vocabulary=INT (default 2000000)"));
}

}  // namespace
}  // namespace psflow
