#include "data/idx_file.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
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

constexpr char kFashion[] = "/usr/share/datasets/fashion-mnist/";

std::string Tmp(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

// An IDX header for unsigned bytes with `dims`, followed by `data`.
std::string Idx(std::vector<uint32_t> dims, std::string data,
                uint8_t type = 0x08) {
  std::string bytes = {0, 0, static_cast<char>(type),
                       static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    bytes.push_back(static_cast<char>(d >> 24));
    bytes.push_back(static_cast<char>(d >> 16));
    bytes.push_back(static_cast<char>(d >> 8));
    bytes.push_back(static_cast<char>(d));
  }
  return bytes + data;
}

std::string WriteRaw(const std::string& name, const std::string& bytes) {
  std::ofstream(Tmp(name), std::ios::binary) << bytes;
  return Tmp(name);
}

std::string WriteGzip(const std::string& name, const std::string& bytes) {
  gzFile f = gzopen(Tmp(name).c_str(), "wb");
  gzwrite(f, bytes.data(), bytes.size());
  gzclose(f);
  return Tmp(name);
}

TEST(IdxFileTest, ReadsTheRealFashionMnistTrainingImages) {
  ASSERT_OK_AND_ASSIGN(
      IdxArray images,
      ReadIdxFile(std::string(kFashion) + "train-images-idx3-ubyte.gz"));
  EXPECT_THAT(images.dims, ElementsAre(60000, 28, 28));
  EXPECT_EQ(images.data.size(), 60000u * 28 * 28);
  // Held once: a vector grown by doubling peaked at twice the data, more
  // than the memory check counts.
  EXPECT_EQ(images.data.capacity(), images.data.size());
}

TEST(IdxFileTest, ReadsRawAndGzippedFilesAlike) {
  const std::string idx = Idx({2, 3}, "abcdef");
  for (const std::string& path :
       {WriteRaw("raw.idx", idx), WriteGzip("gz.idx.gz", idx)}) {
    ASSERT_OK_AND_ASSIGN(IdxArray a, ReadIdxFile(path));
    EXPECT_THAT(a.dims, ElementsAre(2, 3));
    EXPECT_EQ(std::string(a.data.begin(), a.data.end()), "abcdef");
  }
}

TEST(IdxFileTest, AFifoIsRefusedInsteadOfBlocking) {
  const std::string fifo =
      std::string(std::getenv("TEST_TMPDIR")) + "/images.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT(ReadIdxFile(fifo),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("is not a regular file (a FIFO)")));
  EXPECT_THAT(ReadIdxHeader(fifo),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(IdxFileTest, MissingFileIsNotFoundWithAHint) {
  EXPECT_THAT(ReadIdxFile(Tmp("nope.gz")),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("apt-get install dataset-fashion-mnist")));
}

TEST(IdxFileTest, TruncatedDataIsDataLoss) {
  std::string path = WriteGzip("short.gz", Idx({10, 10}, std::string(42, 'x')));
  EXPECT_THAT(ReadIdxFile(path),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("header promises 100 bytes of data but the "
                                 "file holds 42")));
}

// A header is a claim: a few bytes claiming 8 GiB are refused as truncated
// without the reader reserving the 8 GiB first.
TEST(IdxFileTest, AHugeClaimInASmallFileIsDataLossNotAnAllocation) {
  std::string path =
      WriteGzip("claims.gz", Idx({1 << 20, 1 << 10, 8}, std::string(10, 'z')));
  EXPECT_THAT(ReadIdxFile(path),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("header promises 8589934592 bytes of data "
                                 "but the file holds 10")));
}

TEST(IdxFileTest, TruncatedGzipStreamIsDataLoss) {
  std::string full = Tmp("full.gz");
  WriteGzip("full.gz", Idx({1000}, std::string(1000, 'y')));
  std::ifstream in(full, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  std::string path = WriteRaw("cut.gz", bytes.substr(0, bytes.size() / 2));
  EXPECT_THAT(ReadIdxFile(path), StatusIs(absl::StatusCode::kDataLoss));
}

// The gzip trailer (CRC-32 and length, 8 bytes) is what catches damaged
// data; a file that lost it must not read as complete and unchecked.
TEST(IdxFileTest, AGzipFileWithoutItsTrailerIsDataLoss) {
  // Level 0 (stored blocks): a flipped data byte still decompresses, so
  // only the CRC could notice it.
  const std::string idx = Idx({1000}, std::string(1000, 'y'));
  const std::string full = Tmp("stored.gz");
  gzFile f = gzopen(full.c_str(), "wb0");
  gzwrite(f, idx.data(), idx.size());
  gzclose(f);
  std::ifstream in(full, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  ASSERT_OK(ReadIdxFile(full).status());
  const std::string cut = bytes.substr(0, bytes.size() - 8);
  std::string flipped = cut;
  flipped[flipped.size() - 100] ^= 0x01;
  for (const std::string& path :
       {WriteRaw("no_trailer.gz", cut), WriteRaw("flipped.gz", flipped)}) {
    SCOPED_TRACE(path);
    EXPECT_THAT(ReadIdxFile(path),
                StatusIs(absl::StatusCode::kDataLoss,
                         AllOf(HasSubstr(path), HasSubstr("truncated"))));
  }
}

TEST(IdxFileTest, TrailingDataIsDataLoss) {
  std::string path = WriteRaw("long.idx", Idx({2}, "abc"));
  EXPECT_THAT(ReadIdxFile(path), StatusIs(absl::StatusCode::kDataLoss,
                                          HasSubstr("holds more data")));
}

// Bytes appended after the gzip data were dropped by gzread, passing the
// "holds more data than its header" check above.
TEST(IdxFileTest, BytesAfterTheGzipDataAreDataLoss) {
  const std::string gz = WriteGzip("whole.gz", Idx({3}, "abc"));
  std::ifstream in(gz, std::ios::binary);
  const std::string compressed((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
  const std::string path =
      WriteRaw("appended.gz", compressed + std::string(5000, 'r'));
  EXPECT_THAT(ReadIdxFile(path),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("bytes after its gzip data that are not "
                                 "gzip")));
  EXPECT_THAT(CheckIdxFile(path), StatusIs(absl::StatusCode::kDataLoss));
}

TEST(IdxFileTest, NonIdxFileIsDataLoss) {
  std::string path = WriteRaw("text.txt", "hello, world");
  EXPECT_THAT(ReadIdxFile(path), StatusIs(absl::StatusCode::kDataLoss,
                                          HasSubstr("not an IDX file")));
}

TEST(IdxFileTest, OtherElementTypesAreRejected) {
  std::string path = WriteRaw("float.idx", Idx({1}, "abcd", 0x0D));
  EXPECT_THAT(ReadIdxFile(path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("element type 0x0d is not supported")));
}

TEST(IdxFileTest, CorruptDimensionsAreDataLoss) {
  std::string path = WriteRaw("zero.idx", Idx({0}, ""));
  EXPECT_THAT(ReadIdxFile(path), StatusIs(absl::StatusCode::kDataLoss,
                                          HasSubstr("dimension 0 is 0")));
}

// The header names what it claims, not the dimension that happened to
// cross the limit.
TEST(IdxFileTest, AHeaderClaimingTooManyElementsIsNamedWhole) {
  std::string path =
      WriteRaw("too_many.idx", Idx({uint32_t{1} << 31, 28, 28}, ""));
  EXPECT_THAT(
      ReadIdxHeader(path),
      StatusIs(absl::StatusCode::kDataLoss,
               HasSubstr("dimensions [2147483648, 28, ...] claim more than "
                         "2^34 elements")));
}

// CheckIdxFile reads as ReadIdxFile does, with its errors, holding nothing.
TEST(IdxFileTest, CheckIdxFileFindsWhatReadIdxFileFinds) {
  EXPECT_THAT(CheckIdxFile(WriteGzip("ok.gz", Idx({3, 2}, "abcdef"))),
              IsOkAndHolds(ElementsAre(3, 2)));
  EXPECT_THAT(CheckIdxFile(WriteGzip("short2.gz", Idx({10, 10}, "x"))),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("header promises 100 bytes")));
  EXPECT_THAT(
      CheckIdxFile(WriteRaw("long2.idx", Idx({2}, "abc"))),
      StatusIs(absl::StatusCode::kDataLoss, HasSubstr("holds more data")));
}

TEST(IdxFileTest, HeaderIsReadWithoutTheData) {
  // The header promises far more data than the file holds: reading the
  // whole file is DataLoss, reading the header is not.
  const std::string path =
      WriteGzip("header_only.gz", Idx({1000, 28, 28}, "x"));
  EXPECT_THAT(ReadIdxHeader(path), IsOkAndHolds(ElementsAre(1000, 28, 28)));
  EXPECT_THAT(ReadIdxFile(path), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(ReadIdxHeader(WriteRaw("not_idx", "hello")),
              StatusIs(absl::StatusCode::kDataLoss));
}

}  // namespace
}  // namespace psflow
