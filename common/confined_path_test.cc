#include "common/confined_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "common/file_util.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

class PathConfinementTest : public ::testing::Test {
 protected:
  PathConfinementTest()
      : base_(std::string(std::getenv("TEST_TMPDIR")) + "/confine"),
        root_(base_ + "/ckpt") {
    mkdir(base_.c_str(), 0755);
    mkdir((base_ + "/elsewhere").c_str(), 0755);
    std::ofstream(base_ + "/elsewhere/secret") << "not for peers";
  }

  PathConfinement Confinement() {
    absl::StatusOr<PathConfinement> c =
        PathConfinement::Create(root_, "--checkpoint_root");
    EXPECT_OK(c);
    return *c;
  }

  std::string base_, root_;
};

TEST_F(PathConfinementTest, FilesUnderTheRootAreAccepted) {
  PathConfinement c = Confinement();  // creates the root
  mkdir((root_ + "/ckpt-10").c_str(), 0755);
  std::ofstream(root_ + "/ckpt-10/data-0") << "x";
  EXPECT_THAT(c.Check(root_ + "/ckpt-10/data-0", /*exists=*/true),
              IsOkAndHolds(HasSubstr("/ckpt/ckpt-10/data-0")));
  EXPECT_OK(c.Check(root_ + "/ckpt-10/data-1", /*exists=*/false));
}

TEST_F(PathConfinementTest, PathsOutsideTheRootAreRefusedWithTheRootNamed) {
  PathConfinement c = Confinement();
  EXPECT_THAT(
      c.Check(base_ + "/elsewhere/secret", true),
      StatusIs(absl::StatusCode::kPermissionDenied,
               AllOf(HasSubstr("outside the checkpoint root"), HasSubstr(root_),
                     HasSubstr("--checkpoint_root"))));
  EXPECT_THAT(c.Check("/etc/passwd", true),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(
      c.Check("relative/data-0", false),
      StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("not absolute")));
  // A sibling whose name starts like the root is not under it.
  EXPECT_THAT(c.Check(root_ + "-other/data-0", false),
              StatusIs(absl::StatusCode::kPermissionDenied));
}

TEST_F(PathConfinementTest, DotDotIsRefusedEvenWhenItWouldLandInside) {
  PathConfinement c = Confinement();
  EXPECT_THAT(
      c.Check(root_ + "/../elsewhere/secret", true),
      StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("\"..\"")));
  EXPECT_THAT(c.Check(root_ + "/./data-0", false),
              StatusIs(absl::StatusCode::kPermissionDenied));
}

TEST_F(PathConfinementTest, SymlinksThatLeaveTheRootAreRefused) {
  PathConfinement c = Confinement();
  ASSERT_EQ(symlink((base_ + "/elsewhere").c_str(), (root_ + "/out").c_str()),
            0);
  ASSERT_EQ(
      symlink((base_ + "/elsewhere/secret").c_str(), (root_ + "/leak").c_str()),
      0);
  EXPECT_THAT(c.Check(root_ + "/out/secret", true),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("symbolic link")));
  EXPECT_THAT(c.Check(root_ + "/leak", true),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("symbolic link")));
  // Writing into a linked directory is refused too.
  EXPECT_THAT(c.Check(root_ + "/out/new-file", false),
              StatusIs(absl::StatusCode::kPermissionDenied));
  // A symlink that stays inside is fine.
  mkdir((root_ + "/real").c_str(), 0755);
  ASSERT_EQ(symlink((root_ + "/real").c_str(), (root_ + "/alias").c_str()), 0);
  EXPECT_OK(c.Check(root_ + "/alias/data-0", false));
}

TEST_F(PathConfinementTest, ARelativeRootIsRefused) {
  EXPECT_THAT(PathConfinement::Create("ckpt", "--checkpoint_root"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--checkpoint_root=ckpt")));
}

// A file, or a directory of the kernel's, is no root to save into.
TEST_F(PathConfinementTest, ARootThatIsNoWritableDirectoryIsRefused) {
  const std::string file = base_ + "/a_file";
  ASSERT_OK(WriteFileAtomically(file, "x"));
  EXPECT_THAT(
      PathConfinement::Create(file, "--checkpoint_root"),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr("--checkpoint_root=" + file + " is not a directory")));
  if (geteuid() != 0) {
    EXPECT_THAT(PathConfinement::Create("/proc/1", "--checkpoint_root"),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         HasSubstr("is not writable")));
  }
}

TEST_F(PathConfinementTest, AMissingFileIsNotFound) {
  PathConfinement c = Confinement();
  EXPECT_THAT(c.Check(root_ + "/nope/data-0", true),
              StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace psflow
