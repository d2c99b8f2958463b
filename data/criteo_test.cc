#include "data/criteo.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatEq;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string Tmp(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

std::string WriteRaw(const std::string& name, const std::string& bytes) {
  std::ofstream(Tmp(name), std::ios::binary) << bytes;
  return Tmp(name);
}

std::string Gzip(const std::string& bytes) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY),
            Z_OK);
  std::string out(deflateBound(&z, bytes.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = bytes.size();
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = out.size();
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// A line of the small format below: label, 2 integer, 3 categorical.
constexpr CriteoFormat kSmall = {2, 3};

// A full Criteo line (13 integer, 26 categorical) with every value present.
std::string CriteoLine(int label) {
  std::vector<std::string> columns = {std::to_string(label)};
  for (int i = 0; i < 13; ++i) columns.push_back(std::to_string(i * 7));
  for (int c = 0; c < 26; ++c)
    columns.push_back(absl::StrCat("68fd1e6", c % 10));
  return absl::StrJoin(columns, "\t");
}

// data.num_dense as a job config sets it: unset is Criteo's 13, and 0 is
// data without integer columns (psctl data synth-ctr --dense=0 writes it),
// no longer read as "unset".
TEST(CriteoTest, AJobConfigsZeroDenseColumnsAreNone) {
  DataConfig data;
  EXPECT_EQ(CriteoFormatOf(data).num_dense, 13);
  EXPECT_EQ(CriteoFormatOf(data).num_fields, 26);
  data.set_num_dense(0);
  data.set_num_fields(3);
  EXPECT_EQ(CriteoFormatOf(data).num_dense, 0);
  EXPECT_EQ(CriteoFormatOf(data).num_fields, 3);
  data.set_num_dense(5);
  EXPECT_EQ(CriteoFormatOf(data).num_dense, 5);
}

TEST(CriteoTest, ReadsAWellFormedCriteoLine) {
  ASSERT_OK_AND_ASSIGN(
      CtrExamples examples,
      ParseCriteoText(CriteoLine(1) + "\n" + CriteoLine(0) + "\n",
                      CriteoFormat(), "day_0"));
  EXPECT_EQ(examples.num_examples, 2);
  EXPECT_EQ(examples.num_dense, 13);
  EXPECT_EQ(examples.num_fields, 26);
  EXPECT_THAT(examples.labels, ElementsAre(1, 0));
  ASSERT_EQ(examples.dense.size(), 26u);
  EXPECT_THAT(examples.dense[0], FloatEq(0.0f));
  EXPECT_THAT(examples.dense[1], FloatEq(std::log1p(7.0f)));
  EXPECT_THAT(examples.dense[12], FloatEq(std::log1p(84.0f)));
  ASSERT_EQ(examples.offsets.size(), 2u * 26 + 1);
  EXPECT_EQ(examples.offsets.back(), 52);
  ASSERT_EQ(examples.ids.size(), 52u);
  EXPECT_THAT(examples.Bag(0, 0), ElementsAre(CtrFeatureId(0, 0x68fd1e60)));
  EXPECT_THAT(examples.Bag(1, 25), ElementsAre(CtrFeatureId(25, 0x68fd1e65)));
}

TEST(CriteoTest, TheIdHashIsTheDocumentedFormula) {
  // (field << 48) | (SplitMix64Mix(value) & (2^48 - 1)), SplitMix64's
  // finalizer, whose value for 1 is 0x5692161d100b05e5 (computed apart,
  // in Python).
  EXPECT_EQ(SplitMix64Mix(1), 0x5692161d100b05e5ull);
  EXPECT_EQ(CtrFeatureId(3, 1),
            static_cast<int64_t>((uint64_t{3} << 48) | 0x161d100b05e5ull));
  EXPECT_EQ(CtrFieldOf(CtrFeatureId(25, 0xffffffffffffffffull)), 25);
  EXPECT_GE(CtrFeatureId(kMaxCtrFields - 1, 12345), 0);
  EXPECT_NE(CtrFeatureId(0, 7), CtrFeatureId(1, 7));
}

TEST(CriteoTest, MissingValuesAreZeroAndEmptyBags) {
  ASSERT_OK_AND_ASSIGN(CtrExamples examples,
                       ParseCriteoText("0\t\t5\ta\t\tB\n", kSmall, "t"));
  EXPECT_THAT(examples.dense, ElementsAre(0.0f, FloatEq(std::log(6.0f))));
  EXPECT_THAT(examples.Bag(0, 0), ElementsAre(CtrFeatureId(0, 0xa)));
  EXPECT_THAT(examples.Bag(0, 1), IsEmpty());
  EXPECT_THAT(examples.Bag(0, 2), ElementsAre(CtrFeatureId(2, 0xb)));
  EXPECT_THAT(examples.offsets, ElementsAre(0, 1, 1, 2));
}

TEST(CriteoTest, NegativeAndHugeIntegersAreRead) {
  ASSERT_OK_AND_ASSIGN(CtrExamples examples,
                       ParseCriteoText("1\t-1\t9223372036854775807\t\t\t\n"
                                       "1\t-9223372036854775808\t0\t\t\t\n",
                                       kSmall, "t"));
  EXPECT_THAT(examples.dense,
              ElementsAre(0.0f, FloatEq(std::log1p(9.223372e18f)), 0.0f, 0.0f));
}

TEST(CriteoTest, OtherColumnCountsAndWindowsLineEndsAreRead) {
  ASSERT_OK_AND_ASSIGN(CtrExamples examples,
                       ParseCriteoText("1\tffffffffffffffff\r\n0\t0\r\n",
                                       CriteoFormat{0, 1}, "t"));
  EXPECT_EQ(examples.num_examples, 2);
  EXPECT_THAT(examples.ids,
              ElementsAre(CtrFeatureId(0, ~uint64_t{0}), CtrFeatureId(0, 0)));
  EXPECT_THAT(examples.dense, IsEmpty());
}

TEST(CriteoTest, TheLastLineMayLackItsNewline) {
  ASSERT_OK_AND_ASSIGN(
      CtrExamples examples,
      ParseCriteoText("1\t1\t2\ta\tb\tc\n0\t3\t4\t\t\t", kSmall, "t"));
  EXPECT_EQ(examples.num_examples, 2);
}

TEST(CriteoTest, ReadsPlainAndGzippedFilesAlike) {
  std::string text;
  for (int i = 0; i < 5000; ++i) text += CriteoLine(i % 3 == 0) + "\n";
  ASSERT_OK_AND_ASSIGN(CtrExamples plain,
                       LoadCriteoFile(WriteRaw("day.txt", text)));
  // No ".gz" on purpose: the magic bytes decide.
  ASSERT_OK_AND_ASSIGN(CtrExamples gzipped,
                       LoadCriteoFile(WriteRaw("day.bin", Gzip(text))));
  EXPECT_EQ(plain.num_examples, 5000);
  EXPECT_EQ(gzipped.num_examples, 5000);
  EXPECT_EQ(plain.labels, gzipped.labels);
  EXPECT_EQ(plain.dense, gzipped.dense);
  EXPECT_EQ(plain.offsets, gzipped.offsets);
  EXPECT_EQ(plain.ids, gzipped.ids);
}

TEST(CriteoTest, LinesSplitAcrossReadsAreJoined) {
  // More than the reader's 1 MiB buffer, with lines of varying lengths, so
  // reads end inside lines.
  std::string text;
  for (int i = 0; text.size() < (3u << 20); ++i) {
    text += absl::StrCat(i % 2, "\t", i, "\t\t", absl::Hex(i * 2654435761u),
                         "\t\t", absl::Hex(i), "\n");
  }
  ASSERT_OK_AND_ASSIGN(CtrExamples from_file,
                       LoadCriteoFile(WriteRaw("long.txt", text), kSmall));
  ASSERT_OK_AND_ASSIGN(CtrExamples in_memory,
                       ParseCriteoText(text, kSmall, "long.txt"));
  EXPECT_EQ(from_file.ids, in_memory.ids);
  EXPECT_EQ(from_file.dense, in_memory.dense);
  EXPECT_EQ(from_file.num_examples, in_memory.num_examples);
}

struct Malformed {
  std::string text;
  std::string message;
};

TEST(CriteoTest, EveryMalformedLineIsNamedWithItsLineNumber) {
  const std::string good = "1\t1\t2\ta\tb\tc\n";
  const std::vector<Malformed> cases = {
      {good + "1\t1\t2\ta\tb\n",
       "t:2: 5 tab-separated columns, expected 6 (the label, 2 integer and 3 "
       "categorical)"},
      {good + "1\t1\t2\ta\tb\tc\td\n", "t:2: 7 tab-separated columns"},
      {good + "1 1 2 a b c\n", "t:2: 1 tab-separated column, expected 6"},
      {good + good + "2\t1\t2\ta\tb\tc\n",
       "t:3: column 1 (label): \"2\" is not 0 or 1; every line starts with "
       "the label"},
      {"label\tI1\tI2\tC1\tC2\tC3\n" + good,
       "t:1: column 1 (label): \"label\" is not 0 or 1; Criteo text has no "
       "header line"},
      {good + "0\t1x\t2\ta\tb\tc\n",
       "t:2: column 2 (I1): \"1x\" is not an integer"},
      {good + "0\t1\t-\ta\tb\tc\n", "t:2: column 3 (I2): \"-\" is not an"},
      {good + "0\t1\t99999999999999999999\ta\tb\tc\n",
       "t:2: column 3 (I2): \"99999999999999999999\" does not fit in 64 bits"},
      {good + "0\t1\t2\ta\tbg\tc\n",
       "t:2: column 5 (C2): \"bg\" is not hexadecimal"},
      {good + "0\t1\t2\ta\tb\t0123456789abcdef0\n",
       "t:2: column 6 (C3): \"0123456789abcdef0\" has 17 hex digits; at most "
       "16"},
      {good + "\n" + good, "t:2: empty line; a blank line inside the data"},
      {good + "\n", "t:2: empty line"},
      {good + "\r\n", "t:2: empty line"},
      {good + "1\t\x80\x01\t2\ta\tb\tc\n",
       "t:2: column 2 (I1): \"\\x80\\x01\" is not an integer"},
  };
  for (const Malformed& c : cases) {
    EXPECT_THAT(
        ParseCriteoText(c.text, kSmall, "t"),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << absl::CHexEscape(c.text);
  }
}

TEST(CriteoTest, ALongBadValueIsQuotedShort) {
  const std::string value(1000, 'z');
  absl::StatusOr<CtrExamples> parsed =
      ParseCriteoText("1\t1\t2\t" + value + "\tb\tc\n", kSmall, "t");
  EXPECT_THAT(parsed, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("\"zzzzzzzzzzzzzzzzzzzzzzzz...\" is "
                                         "not hexadecimal")));
  EXPECT_LT(parsed.status().message().size(), 300u);
}

// The line limit grows with the columns a job config may name (up to
// 4096 + 4096): a valid wide line was refused as "not a Criteo file", and
// a job config could not raise the limit.
TEST(CriteoTest, AWideFormatsLinesFitItsLimit) {
  DataConfig data;
  EXPECT_EQ(CriteoFormatOf(data).max_line_bytes, int64_t{64} << 10);
  data.set_num_dense(0);
  data.set_num_fields(4096);
  const CriteoFormat wide = CriteoFormatOf(data);
  std::vector<std::string> columns = {"1"};
  for (int c = 0; c < 4096; ++c) columns.push_back("ffffffffffffffff");
  const std::string line = absl::StrJoin(columns, "\t") + "\n";
  ASSERT_GT(line.size(), size_t{64} << 10);
  ASSERT_OK_AND_ASSIGN(CtrExamples examples,
                       ParseCriteoText(line, wide, "wide"));
  EXPECT_EQ(examples.num_examples, 1);
  EXPECT_EQ(examples.num_fields, 4096);
}

TEST(CriteoTest, AnOverlongLineIsRefusedBeforeItIsHeld) {
  CriteoFormat format = kSmall;
  format.max_line_bytes = 100;
  const std::string good = "1\t1\t2\ta\tb\tc\n";
  const std::string overlong = "1\t" + std::string(200, '1') + "\t2\ta\tb\tc\n";
  EXPECT_THAT(ParseCriteoText(good + overlong, format, "t"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("t:2: longer than 100 bytes; a Criteo line "
                                 "is under 1 KiB")));
  // Without a newline at all (a binary file), from a file in pieces.
  const std::string path = WriteRaw("nolines.bin", std::string(3 << 20, 'x'));
  EXPECT_THAT(LoadCriteoFile(path, kSmall),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(path + ":1: longer than 65536 bytes")));
}

TEST(CriteoTest, AFileWithoutExamplesIsAnError) {
  EXPECT_THAT(ParseCriteoText("", kSmall, "t"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("t: holds no examples")));
  EXPECT_THAT(LoadCriteoFile(WriteRaw("empty.txt", ""), kSmall),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("holds no examples")));
  EXPECT_THAT(ParseCriteoText("\n", kSmall, "t"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("t:1: empty line")));
}

TEST(CriteoTest, TooManyExamplesIsResourceExhausted) {
  CriteoFormat format = kSmall;
  format.max_examples = 2;
  const std::string good = "1\t1\t2\ta\tb\tc\n";
  EXPECT_OK(ParseCriteoText(good + good, format, "t"));
  EXPECT_THAT(ParseCriteoText(good + good + good, format, "t"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("t:3: more than 2 examples")));
}

TEST(CriteoTest, ABadFormatIsNamed) {
  EXPECT_THAT(ParseCriteoText("1\n", CriteoFormat{0, 0}, "t"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("no feature columns")));
  EXPECT_THAT(LoadCriteoFile("/nonexistent", CriteoFormat{-1, 26}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("CriteoFormat.num_dense is -1")));
  EXPECT_THAT(ParseCriteoText("1\n", CriteoFormat{13, 100000}, "t"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("CriteoFormat.num_fields is 100000")));
}

TEST(CriteoTest, AMissingFileIsNotFound) {
  EXPECT_THAT(LoadCriteoFile(Tmp("absent.txt")),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("cannot open Criteo data file")));
}

TEST(CriteoTest, AFifoIsRefusedInsteadOfBlocking) {
  const std::string fifo = Tmp("day.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT(LoadCriteoFile(fifo),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("not a regular file")));
}

TEST(CriteoTest, TruncatedGzipIsDataLoss) {
  std::string text;
  for (int i = 0; i < 2000; ++i) text += CriteoLine(i % 2) + "\n";
  const std::string gz = Gzip(text);
  for (size_t keep : {gz.size() - 4, gz.size() / 2, size_t{20}}) {
    EXPECT_THAT(LoadCriteoFile(WriteRaw("cut.gz", gz.substr(0, keep))),
                StatusIs(absl::StatusCode::kDataLoss,
                         HasSubstr("the gzip data ends early")))
        << keep << " of " << gz.size() << " bytes";
  }
}

// gzread ignored whatever followed the last gzip member: a file with
// text appended to it (`cat more.txt >> train.txt.gz`) read as the
// compressed part alone, without a word.
TEST(CriteoTest, BytesAppendedToGzipDataAreDataLoss) {
  const std::string a = CriteoLine(1) + "\n";
  const std::string b = CriteoLine(0) + "\n";
  const std::string path = WriteRaw("appended.txt.gz", Gzip(a) + b);
  EXPECT_THAT(LoadCriteoFile(path, CriteoFormat()),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("holds bytes after its gzip data that are "
                                 "not gzip")));
  // Gzip members one after another (gzip, pigz) are one file.
  const std::string members = WriteRaw("members.txt.gz", Gzip(a) + Gzip(b));
  ASSERT_OK_AND_ASSIGN(CtrExamples read,
                       LoadCriteoFile(members, CriteoFormat()));
  EXPECT_EQ(read.num_examples, 2);
  EXPECT_THAT(read.labels, ElementsAre(1, 0));
  // Zeros padding it to a block are no data (gzip takes them too).
  const std::string padded =
      WriteRaw("padded.txt.gz", Gzip(a) + Gzip(b) + std::string(512, '\0'));
  ASSERT_OK_AND_ASSIGN(read, LoadCriteoFile(padded, CriteoFormat()));
  EXPECT_EQ(read.num_examples, 2);
}

TEST(CriteoTest, CorruptGzipIsDataLoss) {
  std::string text;
  for (int i = 0; i < 2000; ++i) text += CriteoLine(i % 2) + "\n";
  std::string gz = Gzip(text);
  for (size_t i = 100; i < 400; ++i) gz[i] = static_cast<char>(gz[i] ^ 0x5a);
  EXPECT_THAT(
      LoadCriteoFile(WriteRaw("corrupt.gz", gz)),
      StatusIs(absl::StatusCode::kDataLoss, HasSubstr("the file is corrupt")));
}

TEST(CriteoTest, AGzippedFileNamesTheBadLine) {
  const std::string path =
      WriteRaw("bad.gz", Gzip(CriteoLine(1) + "\n" + CriteoLine(0) + "\t\n"));
  EXPECT_THAT(LoadCriteoFile(path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(path + ":2: 41 tab-separated columns")));
}

// The chief's count of a training file: every line checked, none kept.
TEST(CriteoTest, DescribingAFileCountsAndChecksWithoutKeepingExamples) {
  std::string text;
  for (int i = 0; i < 5000; ++i) text += CriteoLine(i % 3 == 0) + "\n";
  for (const std::string& path :
       {WriteRaw("describe.txt", text), WriteRaw("describe.gz", Gzip(text))}) {
    ASSERT_OK_AND_ASSIGN(CtrExamples described, DescribeCriteoFile(path));
    EXPECT_EQ(described.num_examples, 5000);
    EXPECT_EQ(described.num_dense, 13);
    EXPECT_EQ(described.num_fields, 26);
    EXPECT_TRUE(described.ids.empty());
    EXPECT_TRUE(described.labels.empty());
    EXPECT_TRUE(described.dense.empty());
    EXPECT_LE(described.offsets.size(), 1u);
  }
  const std::string bad = WriteRaw(
      "describe_bad.txt", CriteoLine(1) + "\n" + CriteoLine(0) + "\tx\n");
  EXPECT_THAT(
      DescribeCriteoFile(bad),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(bad + ":2: ")));
  EXPECT_THAT(DescribeCriteoFile(WriteRaw("describe_empty.txt", "")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("holds no examples")));
}

CtrExamples Numbered(int n) {
  std::string text;
  // Example i: label i % 2, dense i, field 1 holds id of value i (field 0
  // missing on even i).
  for (int i = 0; i < n; ++i) {
    text += absl::StrCat(i % 2, "\t", i, "\t0\t", i % 2 ? "ff" : "", "\t",
                         absl::Hex(i), "\t\n");
  }
  return *ParseCriteoText(text, kSmall, "t");
}

TEST(CtrShardOfTest, WorkersTakeEveryCountthExample) {
  const CtrExamples all = Numbered(7);
  const CtrExamples shard = CtrShardOf(all, 1, 3);  // examples 1 and 4
  EXPECT_EQ(shard.num_examples, 2);
  EXPECT_EQ(shard.num_dense, 2);
  EXPECT_EQ(shard.num_fields, 3);
  EXPECT_THAT(shard.labels, ElementsAre(1, 0));
  EXPECT_THAT(shard.dense, ElementsAre(FloatEq(std::log(2.0f)), 0.0f,
                                       FloatEq(std::log(5.0f)), 0.0f));
  EXPECT_THAT(shard.offsets, ElementsAre(0, 1, 2, 2, 2, 3, 3));
  EXPECT_THAT(shard.ids, ElementsAre(CtrFeatureId(0, 0xff), CtrFeatureId(1, 1),
                                     CtrFeatureId(1, 4)));
}

TEST(CtrShardOfTest, ShardsPartitionTheExamples) {
  const CtrExamples all = Numbered(10);
  int64_t examples = 0, ids = 0;
  for (int w = 0; w < 4; ++w) {
    const CtrExamples shard = CtrShardOf(all, w, 4);
    EXPECT_EQ(shard.num_examples, w < 2 ? 3 : 2);
    EXPECT_EQ(shard.offsets.size(), shard.num_examples * 3 + 1);
    EXPECT_EQ(shard.offsets.back(), static_cast<int64_t>(shard.ids.size()));
    examples += shard.num_examples;
    ids += shard.ids.size();
  }
  EXPECT_EQ(examples, 10);
  EXPECT_EQ(ids, static_cast<int64_t>(all.ids.size()));
  EXPECT_EQ(CtrShardOf(Numbered(2), 3, 4).num_examples, 0);
}

}  // namespace
}  // namespace psflow
