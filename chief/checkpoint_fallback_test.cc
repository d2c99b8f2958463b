// RestoreNewestIntactCheckpoint over a real checkpoint directory (state
// file and ckpt-<step> directories on disk), with a restore function that
// plays the servers' checks.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_manager.h"
#include "checkpoint/paths.h"
#include "checkpoint/state_file.h"
#include "chief/recovery.h"
#include "common/file_util.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class CheckpointFallbackTest : public ::testing::Test {
 protected:
  // A directory keeping ckpt-<step> for each of `steps`, oldest first.
  void Keep(const std::string& name, const std::vector<int64_t>& steps) {
    dir_ = JoinPath(::testing::TempDir(), name);
    ASSERT_OK(RemoveRecursively(dir_));
    ASSERT_OK(MakeDirectories(dir_));
    CheckpointState state;
    for (int64_t step : steps) {
      ASSERT_OK(MakeDirectories(JoinPath(dir_, CheckpointName(step))));
      AddCheckpoint(state, CheckpointName(step), 1000.0 + step,
                    RetentionPolicy());
    }
    ASSERT_OK(WriteCheckpointState(dir_, state));
  }

  // What restoring each path returns (default: its step).
  absl::StatusOr<RestoredCheckpoint> Restore() {
    return RestoreNewestIntactCheckpoint(
        dir_, [this](const std::string& path) -> absl::StatusOr<int64_t> {
          tried_.push_back(path);
          if (auto it = results_.find(path); it != results_.end()) {
            return it->second;
          }
          return *ParseCheckpointName(path.substr(dir_.size() + 1));
        });
  }

  std::string Path(int64_t step) const {
    return JoinPath(dir_, CheckpointName(step));
  }

  std::string dir_;
  std::map<std::string, absl::StatusOr<int64_t>> results_;
  std::vector<std::string> tried_;
};

TEST_F(CheckpointFallbackTest, AnIntactNewestIsRestoredAlone) {
  Keep("fallback_intact", {100, 200});
  ASSERT_OK_AND_ASSIGN(RestoredCheckpoint restored, Restore());
  EXPECT_EQ(restored.path, Path(200));
  EXPECT_EQ(restored.step, 200);
  EXPECT_THAT(tried_, ElementsAre(Path(200)));
}

TEST_F(CheckpointFallbackTest, ADamagedNewestGivesWayAndIsSetAside) {
  Keep("fallback_damaged", {100, 200, 300});
  results_[Path(300)] = absl::DataLossError("data-00001-of-00002: truncated");
  ASSERT_OK(RemoveRecursively(Path(200)));  // gone by hand
  ASSERT_OK_AND_ASSIGN(RestoredCheckpoint restored, Restore());
  EXPECT_EQ(restored.path, Path(100));
  EXPECT_EQ(restored.step, 100);
  EXPECT_THAT(tried_, ElementsAre(Path(300), Path(100)));

  // No longer listed, so a later save of step 300 writes a new one; kept
  // on disk for inspection.
  ASSERT_OK_AND_ASSIGN(CheckpointState state, ReadCheckpointState(dir_));
  EXPECT_THAT(state.all_model_checkpoint_paths(), ElementsAre("ckpt-100"));
  EXPECT_EQ(state.model_checkpoint_path(), "ckpt-100");
  EXPECT_FALSE(PathExists(Path(300)));
  EXPECT_TRUE(IsDirectory(Path(300) + ".damaged"));

  // Damaged again at the same step: the earlier copy is not replaced.
  Keep("fallback_damaged", {100, 300});
  ASSERT_OK(MakeDirectories(Path(300) + ".damaged"));
  results_[Path(300)] = absl::DataLossError("CRC-32C mismatch");
  tried_.clear();
  ASSERT_OK(Restore().status());
  EXPECT_TRUE(IsDirectory(Path(300) + ".damaged"));
  EXPECT_TRUE(IsDirectory(Path(300) + ".damaged-2"));
}

TEST_F(CheckpointFallbackTest, OtherErrorsAreNotDamage) {
  Keep("fallback_other", {100, 200});
  for (const absl::Status& error :
       {absl::UnavailableError("ps-1 is gone"),
        absl::FailedPreconditionError("a checkpoint of another model"),
        PartlyRestoredError(absl::DataLossError("ps-0's file changed"))}) {
    SCOPED_TRACE(error.ToString());
    results_[Path(200)] = error;
    tried_.clear();
    EXPECT_EQ(Restore().status(), error);
    EXPECT_THAT(tried_, ElementsAre(Path(200)));
    ASSERT_OK_AND_ASSIGN(CheckpointState state, ReadCheckpointState(dir_));
    EXPECT_EQ(state.model_checkpoint_path(), "ckpt-200");
  }
}

TEST_F(CheckpointFallbackTest, EveryCheckpointDamagedIsTheNewestsError) {
  Keep("fallback_all", {100, 200, 300});
  for (int64_t step : {100, 200, 300}) {
    results_[Path(step)] = absl::DataLossError(absl::StrCat("bad ", step));
  }
  EXPECT_THAT(Restore().status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("bad 300"),
                             HasSubstr("the older kept checkpoints "
                                       "(ckpt-200, ckpt-100) are damaged"))));
  // Nothing set aside: there is nothing better to list.
  ASSERT_OK_AND_ASSIGN(CheckpointState state, ReadCheckpointState(dir_));
  EXPECT_EQ(state.all_model_checkpoint_paths_size(), 3);
  EXPECT_TRUE(IsDirectory(Path(300)));
}

TEST_F(CheckpointFallbackTest, NoCheckpointIsNotFound) {
  dir_ = JoinPath(::testing::TempDir(), "fallback_none");
  ASSERT_OK(MakeDirectories(dir_));
  EXPECT_THAT(Restore().status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_TRUE(tried_.empty());
}

}  // namespace
}  // namespace psflow
