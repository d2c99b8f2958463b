#include "common/port_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

std::string TestPath(const std::string& name) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/port_", name);
  unlink(path.c_str());
  return path;
}

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

TEST(PortFileTest, HoldsThePortUntilTheServerStops) {
  const std::string path = TestPath("held");
  {
    ASSERT_OK_AND_ASSIGN(PortFile file, PortFile::Write(path, 40123));
    EXPECT_THAT(ReadFileToString(path), IsOkAndHolds("40123\n"));
    PortFile moved = std::move(file);  // the moved-from one removes nothing
  }
  EXPECT_FALSE(Exists(path));
}

TEST(PortFileTest, ReplacesAStaleFile) {
  const std::string path = TestPath("stale");
  ASSERT_OK(WriteFileAtomically(path, "1111\n"));
  ASSERT_OK_AND_ASSIGN(PortFile file, PortFile::Write(path, 2222));
  EXPECT_THAT(ReadFileToString(path), IsOkAndHolds("2222\n"));
}

TEST(PortFileTest, LeavesAFileAnotherServerWroteSince) {
  const std::string path = TestPath("taken");
  {
    ASSERT_OK_AND_ASSIGN(PortFile file, PortFile::Write(path, 3333));
    ASSERT_OK(WriteFileAtomically(path, "4444\n"));
  }
  EXPECT_THAT(ReadFileToString(path), IsOkAndHolds("4444\n"));
}

TEST(PortFileTest, NeverWritesThroughASymbolicLink) {
  const std::string target = TestPath("target");
  const std::string link = TestPath("link");
  ASSERT_OK(WriteFileAtomically(target, "precious"));
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  EXPECT_THAT(PortFile::Write(link, 5555).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("--port_file")));
  EXPECT_THAT(ReadFileToString(target), IsOkAndHolds("precious"));
}

TEST(PortFileTest, AMissingDirectoryIsAClearError) {
  EXPECT_THAT(PortFile::Write(TestPath("no/such/dir/port"), 1).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("no/such/dir/port")));
}

}  // namespace
}  // namespace psflow
