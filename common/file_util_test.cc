#include "common/file_util.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

std::string Temp(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/file_util_", name);
}

// A FIFO with no writer would block an ordinary open forever; here it is
// refused at once, by name, like a directory or a device.
TEST(FileUtilTest, OnlyRegularFilesAreOpenedForReading) {
  const std::string fifo = Temp("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT(OpenRegularFile(fifo),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr(fifo + " is not a regular file (a FIFO)")));
  EXPECT_THAT(ReadFileToString(fifo),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(RandomAccessFile::Open(::testing::TempDir()).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("a directory")));
  EXPECT_THAT(
      ReadFileToString("/dev/zero"),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("a device")));
  EXPECT_THAT(ReadFileToString(Temp("missing")),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST(FileUtilTest, ReadFileToStringRefusesFilesOverItsLimitBeforeReading) {
  const std::string path = Temp("big");
  ASSERT_OK(WriteFileAtomically(path, std::string(1000, 'x')));
  EXPECT_THAT(ReadFileToString(path, 999),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is 1000 bytes; at most 999")));
  ASSERT_OK_AND_ASSIGN(std::string text, ReadFileToString(path, 1000));
  EXPECT_EQ(text.size(), 1000u);
}

}  // namespace
}  // namespace psflow
