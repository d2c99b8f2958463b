// ReadBest against damaged best/eval.json files: the evaluator reads it at
// start, so each must be an error naming the file, never a crash.
#include "checkpoint/best_copy.h"

#include <fcntl.h>
#include <unistd.h>

#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

class BestCopyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(
        ::testing::TempDir(), "/best_copy_",
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_OK(MakeDirectories(BestDirectory(dir_)));
    record_ = BestDirectory(dir_) + "/eval.json";
  }

  // Writes `text` as the record and expects ReadBest to refuse it with a
  // DataLoss that names the file and contains `problem`.
  void ExpectDamaged(const std::string& text, const std::string& problem) {
    SCOPED_TRACE(text.substr(0, 80));
    ASSERT_OK(WriteFileAtomically(record_, text));
    EXPECT_THAT(ReadBest(dir_),
                StatusIs(absl::StatusCode::kDataLoss,
                         AllOf(HasSubstr(record_), HasSubstr(problem))));
  }

  std::string dir_;
  std::string record_;
};

TEST_F(BestCopyTest, ReadsAGoodRecordAndNothingWhenThereIsNone) {
  ASSERT_OK_AND_ASSIGN(std::optional<BestRecord> none, ReadBest(dir_));
  EXPECT_FALSE(none.has_value());
  ASSERT_OK(WriteFileAtomically(
      record_,
      R"({"step": 12, "accuracy": 0.875, "loss": 0.25, "checkpoint": "ckpt-12"})"));
  ASSERT_OK_AND_ASSIGN(std::optional<BestRecord> best, ReadBest(dir_));
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->step, 12);
  EXPECT_DOUBLE_EQ(best->accuracy, 0.875);
  EXPECT_DOUBLE_EQ(best->loss, 0.25);
}

// Reading a value as the wrong kind threw std::bad_variant_access.
TEST_F(BestCopyTest, AValueOfTheWrongKindIsDataLoss) {
  ExpectDamaged(R"({"step": "12", "accuracy": 0.5, "loss": 1})",
                "\"step\" as the string \"12\"");
  ExpectDamaged(R"({"step": 12, "accuracy": true, "loss": 1})",
                "\"accuracy\" as true");
  ExpectDamaged(R"({"step": 12, "accuracy": 0.5, "loss": null})",
                "\"loss\" as null");
  ExpectDamaged(R"([12, 0.5, 1])", "is not a JSON object");
}

// 1e300 cast to int64 is undefined behaviour; other values are nonsense.
TEST_F(BestCopyTest, AValueOutOfRangeIsDataLoss) {
  ExpectDamaged(R"({"step": 1e300, "accuracy": 0.5, "loss": 1})",
                "\"step\" as the number 1e+300");
  ExpectDamaged(R"({"step": -1, "accuracy": 0.5, "loss": 1})", "\"step\"");
  ExpectDamaged(R"({"step": 1.5, "accuracy": 0.5, "loss": 1})", "\"step\"");
  ExpectDamaged(R"({"step": 12, "accuracy": 1.5, "loss": 1})", "\"accuracy\"");
  ExpectDamaged(R"({"step": 12, "accuracy": 0.5, "loss": -2})", "\"loss\"");
}

TEST_F(BestCopyTest, ATruncatedOrIncompleteRecordIsDataLoss) {
  ExpectDamaged(R"({"step": 12, "accur)", "is not valid JSON");
  ExpectDamaged("", "is not valid JSON");
  ExpectDamaged(R"({"step": 12, "loss": 1})", "lacks \"accuracy\"");
}

// The record is a line of JSON; a huge file is damage, refused unread.
TEST_F(BestCopyTest, AnOversizedRecordIsDataLossWithoutReadingIt) {
  ExpectDamaged(absl::StrCat(R"({"step": 12, "accuracy": 0.5, "loss": 1})",
                             std::string(1 << 20, ' ')),
                "a record is at most 65536 bytes");
  const int fd = open(record_.c_str(), O_WRONLY | O_TRUNC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, int64_t{1} << 40), 0);  // sparse: no disk used
  close(fd);
  EXPECT_THAT(ReadBest(dir_),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr(record_), HasSubstr("too large"))));
}

// A checkpoint directory of one small file, for KeepAsBest to copy.
std::string FakeCheckpoint(const std::string& dir, int64_t step) {
  const std::string path = absl::StrCat(dir, "/ckpt-", step);
  EXPECT_OK(MakeDirectories(path));
  EXPECT_OK(WriteFileAtomically(path + "/index", "index"));
  return path;
}

TEST_F(BestCopyTest, KeepsARecordThatReadsBack) {
  ASSERT_OK(
      KeepAsBest(dir_, FakeCheckpoint(dir_, 12), BestRecord{12, 0.875, 1e300}));
  ASSERT_OK_AND_ASSIGN(std::optional<BestRecord> best, ReadBest(dir_));
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->step, 12);
  EXPECT_DOUBLE_EQ(best->accuracy, 0.875);
  EXPECT_DOUBLE_EQ(best->loss, 1e300);
}

// %.6f wrote a loss of nan or inf as nan or inf, which is not JSON: the
// evaluator could no longer read its own record at its next start.
TEST_F(BestCopyTest, AnEvaluationWithANonFiniteValueIsNeverRecorded) {
  const std::string good = FakeCheckpoint(dir_, 12);
  ASSERT_OK(KeepAsBest(dir_, good, BestRecord{12, 0.5, 0.25}));
  const std::string bad = FakeCheckpoint(dir_, 20);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (const BestRecord& record :
       {BestRecord{20, 0.9, nan}, BestRecord{20, 0.9, inf},
        BestRecord{20, 0.9, -inf}, BestRecord{20, nan, 0.1},
        BestRecord{20, 0.9, -1}, BestRecord{-1, 0.9, 0.1}}) {
    SCOPED_TRACE(
        absl::StrCat(record.step, " ", record.accuracy, " ", record.loss));
    EXPECT_THAT(KeepAsBest(dir_, bad, record),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("not keeping " + bad),
                               HasSubstr("keeps the previous best"))));
    // The previous best stands, readable, and nothing was copied.
    ASSERT_OK_AND_ASSIGN(std::optional<BestRecord> best, ReadBest(dir_));
    ASSERT_TRUE(best.has_value());
    EXPECT_EQ(best->step, 12);
    EXPECT_DOUBLE_EQ(best->loss, 0.25);
    EXPECT_FALSE(PathExists(BestDirectory(dir_) + "/ckpt-20"));
  }
}

// A diverged checkpoint (loss nan) with the highest accuracy is refused;
// it must not stand as the best in memory, or no later checkpoint below
// its accuracy would ever be kept (89abfad).
TEST_F(BestCopyTest, ARefusedCheckpointLeavesTheNextOneItsChance) {
  BestCheckpointKeeper keeper(dir_, std::nullopt);
  const std::string first = FakeCheckpoint(dir_, 10);
  ASSERT_THAT(keeper.Offer(first, BestRecord{10, 0.5, 0.7}),
              IsOkAndHolds(true));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(keeper.Offer(FakeCheckpoint(dir_, 20), BestRecord{20, 0.9, nan}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_TRUE(keeper.best().has_value());
  EXPECT_EQ(keeper.best()->step, 10);

  // Better than what was kept, worse than what was refused.
  EXPECT_THAT(keeper.Offer(FakeCheckpoint(dir_, 30), BestRecord{30, 0.6, 0.5}),
              IsOkAndHolds(true));
  ASSERT_OK_AND_ASSIGN(std::optional<BestRecord> best, ReadBest(dir_));
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->step, 30);
  EXPECT_TRUE(PathExists(BestDirectory(dir_) + "/ckpt-30"));

  // Not better than the best: left alone.
  EXPECT_THAT(keeper.Offer(FakeCheckpoint(dir_, 40), BestRecord{40, 0.6, 0.1}),
              IsOkAndHolds(false));
  EXPECT_EQ(keeper.best()->step, 30);
  EXPECT_FALSE(PathExists(BestDirectory(dir_) + "/ckpt-40"));
}

// A keeper started over a directory with a recorded best (a restarted
// evaluator) needs a checkpoint that beats that record.
TEST_F(BestCopyTest, AKeeperStartsFromTheRecordedBest) {
  ASSERT_OK(
      KeepAsBest(dir_, FakeCheckpoint(dir_, 12), BestRecord{12, 0.8, 0.3}));
  ASSERT_OK_AND_ASSIGN(std::optional<BestRecord> recorded, ReadBest(dir_));
  BestCheckpointKeeper keeper(dir_, recorded);
  EXPECT_THAT(keeper.Offer(FakeCheckpoint(dir_, 20), BestRecord{20, 0.7, 0.2}),
              IsOkAndHolds(false));
  EXPECT_THAT(keeper.Offer(FakeCheckpoint(dir_, 30), BestRecord{30, 0.85, 0.2}),
              IsOkAndHolds(true));
  ASSERT_OK_AND_ASSIGN(std::optional<BestRecord> best, ReadBest(dir_));
  EXPECT_EQ(best->step, 30);
}

}  // namespace
}  // namespace psflow
