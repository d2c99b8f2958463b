#include "common/path_name.h"

#include <string>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

TEST(PathNameTest, OrdinaryNamesPass) {
  for (const char* name :
       {"fashion_mnist_mlp", "run", "ctr-wide.deep", "a", "v2.1", "..."}) {
    EXPECT_OK(CheckPathName(name, "the job name")) << name;
  }
  EXPECT_OK(CheckPathName(std::string(kMaxPathNameBytes, 'x'), "the name"));
}

TEST(PathNameTest, EveryPathLikeNameIsRefusedWithTheRule) {
  const std::string cases[] = {"",
                               ".",
                               "..",
                               "a/b",
                               "/etc",
                               "..\\x",
                               "a\nb",
                               "tab\there",
                               std::string("a\0b", 3),
                               "sp ace",
                               "\x7f",
                               "caf\xc3\xa9",
                               "$(reboot)",
                               std::string(kMaxPathNameBytes + 1, 'x')};
  for (const std::string& name : cases) {
    absl::Status status = CheckPathName(name, "the job name");
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << name;
    EXPECT_THAT(status.message(), HasSubstr("the job name")) << name;
    EXPECT_THAT(status.message(), HasSubstr("letters, digits")) << name;
  }
}

TEST(PathNameTest, ControlCharactersAreEscapedInTheMessage) {
  absl::Status status = CheckPathName("a\nb", "the table name");
  EXPECT_THAT(status.message(), HasSubstr("a\\nb"));
  EXPECT_THAT(status.message(), ::testing::Not(HasSubstr("a\nb")));
}

}  // namespace
}  // namespace psflow
