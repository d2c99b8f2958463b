#include "client/psctl/subcommand.h"

#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// Prints its options and arguments, and exits with --exit.
class EchoCommand : public Subcommand {
 public:
  EchoCommand(std::string name, std::vector<std::string> arguments,
              std::string flag)
      : Subcommand(name, std::move(arguments), "psctl " + name + " [--...]",
                   "Echoes.") {
    mutable_flags().AddInt(flag, &value_, "a number");
    mutable_flags().AddInt("exit", &exit_, "the exit status");
  }

  int Run(const std::vector<std::string>& arguments, std::ostream& out,
          std::ostream& err) override {
    out << name() << " " << value_ << " [" << absl::StrJoin(arguments, ",")
        << "]";
    return exit_;
  }

 private:
  int value_ = 0;
  int exit_ = 0;
};

class SubcommandTest : public ::testing::Test {
 protected:
  SubcommandTest() {
    commands_.push_back(std::make_unique<EchoCommand>(
        "local", std::vector<std::string>{}, "ps"));
    commands_.push_back(std::make_unique<EchoCommand>(
        "ckpt list", std::vector<std::string>{"<dir>"}, "depth"));
    commands_.push_back(std::make_unique<EchoCommand>(
        "ckpt verify", std::vector<std::string>{"<ckpt>"}, "threads"));
  }

  int Run(std::vector<std::string> args) {
    out_.str("");
    err_.str("");
    return RunPsctl(commands_, args, out_, err_);
  }

  Subcommands commands_;
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(SubcommandTest, TheNamedSubcommandRunsWithItsFlagsAndArguments) {
  EXPECT_EQ(Run({"ckpt", "list", "--depth=3", "/tmp/c"}), kExitOk);
  EXPECT_EQ(out_.str(), "ckpt list 3 [/tmp/c]");
  EXPECT_THAT(err_.str(), IsEmpty());
}

TEST_F(SubcommandTest, TheSubcommandsExitStatusIsPsctls) {
  EXPECT_EQ(Run({"local", "--exit=1"}), kExitFailed);
}

TEST_F(SubcommandTest, NoArgumentsPrintTheUsageAsAUsageError) {
  EXPECT_EQ(Run({}), kExitUsage);
  EXPECT_THAT(err_.str(), AllOf(HasSubstr("psctl local [--...]\n"),
                                HasSubstr("psctl ckpt list [--...]\n")));
}

TEST_F(SubcommandTest, AnUnknownCommandPrintsTheUsageAsAUsageError) {
  EXPECT_EQ(Run({"ckpt", "frobnicate", "--depth=1"}), kExitUsage);
  EXPECT_THAT(err_.str(),
              AllOf(HasSubstr("psctl: unknown command \"ckpt frobnicate\""),
                    HasSubstr("psctl ckpt verify [--...]\n      Echoes.\n")));
}

TEST_F(SubcommandTest, AGroupWithoutASubcommandIsUnknown) {
  EXPECT_EQ(Run({"ckpt"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("unknown command \"ckpt\""));
}

TEST_F(SubcommandTest, FlagsBeforeTheSubcommandAreAUsageError) {
  EXPECT_EQ(Run({"--ps=2", "local"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("flags go after the subcommand's name"));
  EXPECT_THAT(out_.str(), IsEmpty());
}

TEST_F(SubcommandTest, AFlagOfAnotherSubcommandIsRejectedNamingItsOwners) {
  EXPECT_EQ(Run({"ckpt", "verify", "/c", "--ps=2"}), kExitUsage);
  EXPECT_THAT(err_.str(),
              AllOf(HasSubstr("psctl ckpt verify: unknown flag --ps (a flag "
                              "of psctl local); psctl ckpt verify takes "
                              "--threads, --exit"),
                    HasSubstr("`psctl ckpt verify --help` lists its flags")));
  EXPECT_THAT(out_.str(), IsEmpty());
}

TEST_F(SubcommandTest, AFlagOfNoSubcommandIsRejectedWithoutAnOwner) {
  EXPECT_EQ(Run({"local", "--bogus"}), kExitUsage);
  EXPECT_THAT(err_.str(), AllOf(HasSubstr("unknown flag --bogus;"),
                                Not(HasSubstr("a flag of"))));
}

TEST_F(SubcommandTest, AMissingArgumentIsAUsageError) {
  EXPECT_EQ(Run({"ckpt", "list", "--depth=2"}), kExitUsage);
  EXPECT_THAT(err_.str(),
              HasSubstr("psctl ckpt list: takes <dir>; got 0 arguments"));
  EXPECT_THAT(out_.str(), IsEmpty());
}

TEST_F(SubcommandTest, AnExtraArgumentIsAUsageError) {
  EXPECT_EQ(Run({"ckpt", "list", "a", "b"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("got 2 arguments (\"a\" \"b\")"));
  EXPECT_EQ(Run({"local", "extra"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("psctl local: unexpected argument "
                                    "\"extra\"; it takes only flags"));
}

TEST_F(SubcommandTest, HelpAfterTheNamePrintsTheSubcommandsFlags) {
  EXPECT_EQ(Run({"ckpt", "list", "--help"}), kExitOk);
  EXPECT_THAT(out_.str(),
              AllOf(HasSubstr("psctl ckpt list [--...]\n"),
                    HasSubstr("--depth=INT (default 0)\n      a number\n"),
                    Not(HasSubstr("--threads"))));
}

TEST_F(SubcommandTest, HelpFirstPrintsPsctlsUsage) {
  EXPECT_EQ(Run({"--help"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("psctl: operate psflow clusters."));
  EXPECT_EQ(Run({"help"}), kExitOk);
}

}  // namespace
}  // namespace psflow
