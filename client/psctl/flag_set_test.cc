#include "client/psctl/flag_set.h"

#include <string>
#include <vector>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The options of a made-up subcommand, bound to its FlagSet.
struct Options {
  std::string job = "job.json";
  int ps = 1;
  bool evaluator = true;
  bool chief = false;
  std::vector<std::string> hosts;
};

class FlagSetTest : public ::testing::Test {
 protected:
  FlagSetTest() : flags_("psctl demo") {
    flags_.AddString("job", &options_.job, "the job config");
    flags_.AddInt("ps", &options_.ps, "parameter servers");
    flags_.AddBool("evaluator", &options_.evaluator, "run an evaluator");
    flags_.AddBool("chief", &options_.chief, "run a chief");
    flags_.AddStringList("hosts", &options_.hosts, "hosts");
  }

  absl::StatusOr<FlagSet::Parsed> Parse(std::vector<std::string> args) {
    return flags_.Parse(args);
  }

  Options options_;
  FlagSet flags_;
};

TEST_F(FlagSetTest, UnsetFlagsKeepTheirDefaults) {
  ASSERT_OK_AND_ASSIGN(FlagSet::Parsed parsed, Parse({}));
  EXPECT_THAT(parsed.positional, IsEmpty());
  EXPECT_FALSE(parsed.help);
  EXPECT_EQ(options_.job, "job.json");
  EXPECT_EQ(options_.ps, 1);
  EXPECT_TRUE(options_.evaluator);
  EXPECT_FALSE(options_.chief);
  EXPECT_THAT(options_.hosts, IsEmpty());
}

TEST_F(FlagSetTest, ValuesComeAfterAnEqualsSignOrAsTheNextArgument) {
  ASSERT_OK(Parse({"--job=a.json", "--ps", "3"}).status());
  EXPECT_EQ(options_.job, "a.json");
  EXPECT_EQ(options_.ps, 3);
}

TEST_F(FlagSetTest, AnEmptyValueAfterTheEqualsSignIsAValue) {
  ASSERT_OK(Parse({"--job="}).status());
  EXPECT_EQ(options_.job, "");
}

TEST_F(FlagSetTest, BoolFlagsTakeNoValueOrAnExplicitOne) {
  ASSERT_OK(Parse({"--chief", "--evaluator=false"}).status());
  EXPECT_TRUE(options_.chief);
  EXPECT_FALSE(options_.evaluator);
  ASSERT_OK(Parse({"--chief=no", "--evaluator=1"}).status());
  EXPECT_FALSE(options_.chief);
  EXPECT_TRUE(options_.evaluator);
}

TEST_F(FlagSetTest, ABoolFlagDoesNotTakeTheNextArgumentAsItsValue) {
  ASSERT_OK_AND_ASSIGN(FlagSet::Parsed parsed, Parse({"--chief", "false"}));
  EXPECT_TRUE(options_.chief);
  EXPECT_THAT(parsed.positional, ElementsAre("false"));
}

TEST_F(FlagSetTest, NoPrefixTurnsABoolFlagOff) {
  ASSERT_OK(Parse({"--noevaluator"}).status());
  EXPECT_FALSE(options_.evaluator);
}

TEST_F(FlagSetTest, NoPrefixOnAFlagThatIsNotABoolIsRejected) {
  EXPECT_THAT(Parse({"--nops"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("--nops"),
                             HasSubstr("--ps is not a boolean flag"))));
}

TEST_F(FlagSetTest, NoPrefixWithAValueIsRejected) {
  EXPECT_THAT(Parse({"--noevaluator=true"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--noevaluator takes no value")));
}

TEST_F(FlagSetTest, BoolFlagWithAWordThatIsNotABooleanIsRejected) {
  EXPECT_THAT(Parse({"--chief=maybe"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("psctl demo"),
                             HasSubstr("--chief=maybe is not a boolean"))));
}

TEST_F(FlagSetTest, IntFlagWithoutANumberIsRejected) {
  EXPECT_THAT(Parse({"--ps=two"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("psctl demo"),
                             HasSubstr("--ps=two is not an integer"))));
  EXPECT_THAT(Parse({"--ps="}), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("is not an integer")));
}

TEST_F(FlagSetTest, AFlagMissingItsValueIsRejected) {
  EXPECT_THAT(Parse({"--job"}), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("--job needs a value")));
}

TEST_F(FlagSetTest, ListFlagsSplitOnCommas) {
  ASSERT_OK(Parse({"--hosts=a,b:1,c"}).status());
  EXPECT_THAT(options_.hosts, ElementsAre("a", "b:1", "c"));
  // Empty entries stay, so the subcommand can say which one is empty.
  ASSERT_OK(Parse({"--hosts="}).status());
  EXPECT_THAT(options_.hosts, ElementsAre(""));
}

TEST_F(FlagSetTest, TheLastOfARepeatedFlagWins) {
  ASSERT_OK(Parse({"--ps=2", "--ps=5", "--hosts=a,b", "--hosts=c"}).status());
  EXPECT_EQ(options_.ps, 5);
  EXPECT_THAT(options_.hosts, ElementsAre("c"));
}

TEST_F(FlagSetTest, OneDashWorksLikeTwo) {
  ASSERT_OK(Parse({"-ps=4", "-nochief"}).status());
  EXPECT_EQ(options_.ps, 4);
  EXPECT_FALSE(options_.chief);
}

TEST_F(FlagSetTest, PositionalArgumentsMayComeBeforeBetweenAndAfterFlags) {
  ASSERT_OK_AND_ASSIGN(FlagSet::Parsed parsed,
                       Parse({"a", "--ps=2", "b", "--chief", "-", "c"}));
  EXPECT_THAT(parsed.positional, ElementsAre("a", "b", "-", "c"));
  EXPECT_EQ(options_.ps, 2);
}

TEST_F(FlagSetTest, DoubleDashEndsTheFlags) {
  ASSERT_OK_AND_ASSIGN(FlagSet::Parsed parsed,
                       Parse({"--ps=2", "--", "--ps=3", "x"}));
  EXPECT_THAT(parsed.positional, ElementsAre("--ps=3", "x"));
  EXPECT_EQ(options_.ps, 2);
}

TEST_F(FlagSetTest, UnknownFlagIsAUsageErrorNamingIt) {
  EXPECT_THAT(
      Parse({"--ps=2", "--bogus=1"}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("psctl demo: unknown flag --bogus"),
                     HasSubstr("takes --job, --ps, --evaluator, --chief, "
                               "--hosts"))));
}

TEST_F(FlagSetTest, AFlagOfAnotherSubcommandIsRejected) {
  std::string tensor;
  FlagSet other("psctl other");
  other.AddString("tensor", &tensor, "a tensor");
  auto elsewhere = [&](absl::string_view name) -> std::string {
    return other.Has(name) ? "a flag of psctl other" : "";
  };
  EXPECT_THAT(flags_.Parse({"--tensor=w"}, elsewhere),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("psctl demo: unknown flag --tensor"),
                             HasSubstr("(a flag of psctl other)"))));
  EXPECT_EQ(tensor, "");
  // And the other way round.
  EXPECT_THAT(other.Parse({"--ps=2"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("psctl other: unknown flag --ps"),
                             HasSubstr("psctl other takes --tensor"))));
}

TEST_F(FlagSetTest, ASetWithoutFlagsSaysSoWhenGivenOne) {
  FlagSet none("psctl bare");
  EXPECT_THAT(none.Parse({"dir", "--ps=1"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("psctl bare takes no flags")));
  EXPECT_EQ(none.Help(), "");
}

TEST_F(FlagSetTest, SomethingThatIsNotAFlagNameIsRejected) {
  EXPECT_THAT(Parse({"--Ps=2"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"--Ps=2\" is not a flag")));
  EXPECT_THAT(Parse({"---ps=2"}), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("is not a flag")));
}

TEST_F(FlagSetTest, HelpIsReportedWithoutSettingAnything) {
  for (const char* help : {"--help", "-help", "-h"}) {
    ASSERT_OK_AND_ASSIGN(FlagSet::Parsed parsed,
                         Parse({"--ps=7", "--bogus", help}));
    EXPECT_TRUE(parsed.help) << help;
    EXPECT_EQ(options_.ps, 1);
  }
}

TEST_F(FlagSetTest, HelpAfterDoubleDashIsAnArgument) {
  ASSERT_OK_AND_ASSIGN(FlagSet::Parsed parsed, Parse({"--", "--help"}));
  EXPECT_FALSE(parsed.help);
  EXPECT_THAT(parsed.positional, ElementsAre("--help"));
}

TEST_F(FlagSetTest, HelpListsEveryFlagWithItsTypeAndDefault) {
  const std::string help = flags_.Help();
  EXPECT_THAT(help, HasSubstr("  --job=STRING (default \"job.json\")\n"
                              "      the job config\n"));
  EXPECT_THAT(help, HasSubstr("  --ps=INT (default 1)\n"));
  EXPECT_THAT(help, HasSubstr("  --evaluator, --noevaluator (default true)\n"));
  EXPECT_THAT(help, HasSubstr("  --hosts=A,B,...\n      hosts\n"));
}

TEST_F(FlagSetTest, NamesAreInRegistrationOrder) {
  EXPECT_THAT(flags_.Names(),
              ElementsAre("job", "ps", "evaluator", "chief", "hosts"));
  EXPECT_TRUE(flags_.Has("ps"));
  EXPECT_FALSE(flags_.Has("nops"));
}

}  // namespace
}  // namespace psflow
