#include "client/psctl/export_target.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "common/file_util.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

class ExportTargetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = std::string(tmp != nullptr ? tmp : "/tmp") + "/export_target";
    (void)RemoveRecursively(dir_);
    checkpoint_ = dir_ + "/ckpt/ckpt-100";
    ASSERT_OK(MakeDirectories(checkpoint_));
    ASSERT_OK(WriteFileAtomically(checkpoint_ + "/index", "index"));
  }
  std::string dir_;
  std::string checkpoint_;
};

TEST_F(ExportTargetTest, ANewFileBesideTheCheckpointIsFine) {
  EXPECT_OK(CheckExportTarget(checkpoint_, dir_ + "/model.onnx", false));
  EXPECT_OK(CheckExportTarget(checkpoint_, dir_ + "/ckpt/model.onnx", false));
}

TEST_F(ExportTargetTest, AnExistingFileNeedsOverwrite) {
  const std::string out = dir_ + "/model.safetensors";
  ASSERT_OK(WriteFileAtomically(out, "older export"));
  EXPECT_THAT(
      CheckExportTarget(checkpoint_, out, false),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               AllOf(HasSubstr(out + " exists"), HasSubstr("--overwrite"))));
  EXPECT_OK(CheckExportTarget(checkpoint_, out, true));
}

TEST_F(ExportTargetTest, NothingButARegularFileIsReplacedEvenWithOverwrite) {
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  const std::string link = dir_ + "/link";
  ASSERT_EQ(symlink((dir_ + "/elsewhere").c_str(), link.c_str()), 0);
  for (const std::string& out : {fifo, link, dir_, std::string("/dev/null")}) {
    SCOPED_TRACE(out);
    EXPECT_THAT(CheckExportTarget(checkpoint_, out, true),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         HasSubstr("refusing to write " + out)));
  }
}

TEST_F(ExportTargetTest, TheCheckpointBeingReadIsNeverWrittenInto) {
  for (const std::string& out :
       {checkpoint_ + "/index", checkpoint_ + "/model.onnx",
        dir_ + "/ckpt/./ckpt-100/model.npz"}) {
    SCOPED_TRACE(out);
    EXPECT_THAT(CheckExportTarget(checkpoint_, out, true),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         HasSubstr("inside the checkpoint being exported")));
  }
  // Also through a link to the checkpoint's directory.
  const std::string alias = dir_ + "/alias";
  ASSERT_EQ(symlink(checkpoint_.c_str(), alias.c_str()), 0);
  EXPECT_THAT(CheckExportTarget(checkpoint_, alias + "/x.onnx", false),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("inside the checkpoint")));
}

}  // namespace
}  // namespace psflow
