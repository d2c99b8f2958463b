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

using ::testing::AllOf;
using ::testing::ElementsAre;
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

// Keys and tokens are written with WriteFileWithMode: a link planted at
// the target must not redirect the secret (or the chmod) to another file.
TEST(FileUtilTest, WriteFileWithModeRefusesASymlinkAndLeavesItsTargetAlone) {
  const std::string victim = Temp("victim");
  ASSERT_OK(WriteFileAtomically(victim, "precious\n"));
  ASSERT_EQ(chmod(victim.c_str(), 0644), 0);
  const std::string link = Temp("key_link");
  ASSERT_EQ(symlink(victim.c_str(), link.c_str()), 0);
  EXPECT_THAT(WriteFileWithMode(link, "secret\n", 0600),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr(link), HasSubstr("symbolic link"))));
  EXPECT_THAT(ReadFileToString(victim), IsOkAndHolds("precious\n"));
  struct stat st;
  ASSERT_EQ(stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  ASSERT_EQ(lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
}

// A name on the way that is no directory is named itself: a link to a
// folder that is gone, or a file (the next step's "No such file or
// directory" named another path and hid the link).
TEST(FileUtilTest, MakeDirectoriesNamesWhatIsNoDirectory) {
  const std::string base = Temp("make_dirs");
  ASSERT_OK(MakeDirectories(base + "/real"));
  const std::string link = base + "/logs";
  ASSERT_EQ(symlink((base + "/gone").c_str(), link.c_str()), 0);
  EXPECT_THAT(MakeDirectories(link + "/run/worker-0"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr(link + " is a symbolic link to " + base +
                                       "/gone"),
                             HasSubstr("not a directory"))));
  ASSERT_OK(WriteFileAtomically(base + "/file", "x"));
  EXPECT_THAT(MakeDirectories(base + "/file/run"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr(base + "/file exists and is not a "
                                        "directory")));
  // A link to a directory is followed, as before.
  ASSERT_EQ(symlink((base + "/real").c_str(), (base + "/alias").c_str()), 0);
  EXPECT_OK(MakeDirectories(base + "/alias/run"));
  EXPECT_OK(MakeDirectories(base + "/real/run"));  // already there
}

// A rename over a device or a FIFO replaces it with a regular file (as
// root, even /dev/null): both writers refuse anything but a regular file.
TEST(FileUtilTest, TheWritersReplaceOnlyRegularFiles) {
  const std::string fifo = Temp("a_fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  const std::string dir = Temp("a_dir");
  ASSERT_OK(MakeDirectories(dir));
  for (const std::string& path : {fifo, dir}) {
    SCOPED_TRACE(path);
    EXPECT_THAT(WriteFileAtomically(path, "x"),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         AllOf(HasSubstr("refusing to write " + path),
                               HasSubstr("regular file"))));
    EXPECT_THAT(WriteFileWithMode(path, "x", 0600),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         HasSubstr("refusing to write " + path)));
  }
  struct stat st;
  ASSERT_EQ(lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_THAT(CheckReplaceableFile("/dev/null"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("a character device")));
  // A regular file, or nothing yet, may be written.
  EXPECT_OK(CheckReplaceableFile(Temp("not_there_yet")));
  ASSERT_OK(WriteFileAtomically(Temp("regular"), "one"));
  ASSERT_OK(WriteFileAtomically(Temp("regular"), "two"));
  EXPECT_THAT(ReadFileToString(Temp("regular")), IsOkAndHolds("two"));
}

TEST(FileUtilTest, WriteFileWithModeReplacesTheFileWithExactlyThatMode) {
  const std::string dir = Temp("mode_dir");
  ASSERT_OK(MakeDirectories(dir));
  const std::string path = dir + "/ps-0.key";
  // An existing file with wider bits, and a umask that would narrow the
  // requested ones: the result has the requested bits either way.
  ASSERT_OK(WriteFileAtomically(path, "an older, longer key\n"));
  ASSERT_EQ(chmod(path.c_str(), 0666), 0);
  const mode_t old_umask = umask(0077);
  EXPECT_OK(WriteFileWithMode(path, "secret\n", 0600));
  EXPECT_OK(WriteFileWithMode(dir + "/ca.crt", "public\n", 0644));
  umask(old_umask);
  EXPECT_THAT(ReadFileToString(path), IsOkAndHolds("secret\n"));
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(stat((dir + "/ca.crt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  // Written beside the target and renamed: no temporary file is left.
  EXPECT_THAT(ListDirectory(dir),
              IsOkAndHolds(ElementsAre("ca.crt", "ps-0.key")));
}

}  // namespace
}  // namespace psflow
