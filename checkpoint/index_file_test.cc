// The index file's reader against hostile and damaged input: its size
// limit and ValidateIndex's arithmetic on values a damaged (or crafted)
// index may hold.
#include "checkpoint/index_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
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

std::string Temp(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/index_file_", name);
}

// One data file of `file_size` bytes and a float32 tensor "w" of `shape`
// with no slices yet.
CheckpointIndex OneTensor(std::initializer_list<int64_t> shape,
                          int64_t file_size) {
  CheckpointIndex index;
  index.set_format_version(kCheckpointFormatVersionDenseOnly);
  CheckpointFile* file = index.add_files();
  file->set_name("data-00000-of-00001");
  file->set_size(file_size);
  CheckpointTensor* tensor = index.add_tensors();
  tensor->set_name("w");
  tensor->set_dtype("float32");
  for (int64_t d : shape) tensor->add_shape(d);
  return index;
}

void AddSlice(CheckpointIndex& index, int64_t element_offset,
              int64_t num_elements, int64_t file_offset) {
  CheckpointSlice* slice = index.mutable_tensors(0)->add_slices();
  slice->set_element_offset(element_offset);
  slice->set_num_elements(num_elements);
  slice->set_file("data-00000-of-00001");
  slice->set_file_offset(file_offset);
}

TEST(IndexFileTest, AGoodIndexRoundTrips) {
  CheckpointIndex index = OneTensor({2, 3}, 24);
  AddSlice(index, 0, 4, 0);
  AddSlice(index, 4, 2, 16);
  ASSERT_OK(ValidateIndex(index));
  const std::string path = Temp("good");
  ASSERT_OK(WriteIndexFile(path, index));
  ASSERT_OK_AND_ASSIGN(CheckpointIndex read, ReadIndexFile(path));
  EXPECT_EQ(read.SerializeAsString(), index.SerializeAsString());
}

// A sparse index file of absurd size (a damaged filesystem, or a crafted
// checkpoint) is refused by its size, before anything is allocated: read
// whole it would abort `psctl ckpt`, the chief and the evaluator.
TEST(IndexFileTest, AnOversizedIndexIsDataLossWithoutReadingIt) {
  for (const int64_t size : {kMaxIndexFileBytes + 1, int64_t{1} << 40}) {
    SCOPED_TRACE(size);
    const std::string path = Temp(absl::StrCat("huge_", size));
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, size), 0);
    close(fd);
    EXPECT_THAT(ReadIndexFile(path),
                StatusIs(absl::StatusCode::kDataLoss,
                         AllOf(HasSubstr(path), HasSubstr("at most"),
                               HasSubstr(absl::StrCat(kMaxIndexFileBytes)))));
  }
}

// Four slices of about 2^62 elements "tile" a one-element tensor when the
// running offset and each slice's 4 * num_elements bytes wrap around.
TEST(IndexFileTest, SlicesWhoseSizesOverflowAreRejected) {
  CheckpointIndex index = OneTensor({1}, 4);
  const int64_t quarter = int64_t{1} << 62;
  AddSlice(index, 0, quarter, 0);
  AddSlice(index, quarter, quarter, 0);
  AddSlice(index, std::numeric_limits<int64_t>::min(), quarter, 0);
  AddSlice(index, -quarter, quarter + 1, 0);
  EXPECT_THAT(ValidateIndex(index),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("has a bad slice of tensor \"w\"")));
  EXPECT_THAT(DecodeIndexFile(EncodeIndexFile(index), "ckpt-1/index"),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("ckpt-1/index"),
                             HasSubstr("bad slice of tensor \"w\""))));
}

// file_offset + 4 * num_elements past INT64_MAX wraps to a negative end
// that is "inside" any file.
TEST(IndexFileTest, AFileOffsetNearTheLimitIsRejected) {
  CheckpointIndex index = OneTensor({1}, 4);
  AddSlice(index, 0, 1, std::numeric_limits<int64_t>::max() - 1);
  EXPECT_THAT(ValidateIndex(index),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("has a bad slice of tensor \"w\"")));
  // The largest offset that still fits is fine; one byte more is not.
  CheckpointIndex fits = OneTensor({1}, 4);
  AddSlice(fits, 0, 1, 0);
  EXPECT_OK(ValidateIndex(fits));
  CheckpointIndex past = OneTensor({1}, 4);
  AddSlice(past, 0, 1, 1);
  EXPECT_THAT(ValidateIndex(past),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// A slice longer than what is left of its tensor is refused even when a
// later one would make the count come out right.
TEST(IndexFileTest, ASliceMayNotRunPastItsTensor) {
  CheckpointIndex index = OneTensor({4}, 1 << 20);
  AddSlice(index, 0, 6, 0);
  EXPECT_THAT(ValidateIndex(index), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("bad slice")));
}

}  // namespace
}  // namespace psflow
