#include "common/metrics/event_file_writer.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <cstdlib>

#include "absl/strings/escaping.h"
#include "common/metrics/event_file_test_util.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/tensorboard.pb.h"

namespace psflow {
namespace {

using ::psflow::testing::ReadEvents;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Bytes computed independently (Python: bitwise CRC-32C and hand-encoded
// protobuf) for Event{wall_time: 1.5, step: 7, summary {value {tag: "loss",
// simple_value: 0.25}}}.
constexpr char kGoldenRecordHex[] =
    "1a00000000000000129bd82d09000000000000f83f10072a0d0a0b0a046c6f7373150000"
    "803ec9d07b8d";

TEST(EventFileWriterTest, RecordFramingMatchesTheGoldenBytes) {
  tensorflow::Event event;
  event.set_wall_time(1.5);
  event.set_step(7);
  auto* value = event.mutable_summary()->add_value();
  value->set_tag("loss");
  value->set_simple_value(0.25f);
  EXPECT_EQ(absl::BytesToHexString(EncodeTfRecord(event.SerializeAsString())),
            kGoldenRecordHex);
}

TEST(EventFileWriterTest, WritesAVersionRecordThenScalars) {
  const std::string dir =
      std::string(std::getenv("TEST_TMPDIR")) + "/logs/run/worker-0";
  ASSERT_OK_AND_ASSIGN(auto writer, EventFileWriter::Create(dir));
  EXPECT_THAT(writer->path(), StartsWith(dir + "/events.out.tfevents."));
  ASSERT_OK(writer->AddScalar("loss", 10, 0.5));
  ASSERT_OK(writer->AddScalar("accuracy", 10, 0.75));
  ASSERT_OK(writer->Flush());
  std::vector<tensorflow::Event> events = ReadEvents(writer->path());
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_EQ(events[1].step(), 10);
  EXPECT_EQ(events[1].summary().value(0).tag(), "loss");
  EXPECT_EQ(events[1].summary().value(0).simple_value(), 0.5f);
  EXPECT_EQ(events[2].summary().value(0).tag(), "accuracy");
  EXPECT_GT(events[2].wall_time(), 1.7e9);
}

int64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

// A full disk, as the file-size limit plays it (writes past it fail with
// EFBIG, after a short write of what fits): the flush fails, the file
// still ends in its last whole record (the part of a record that fitted
// is cut off), and the records are written whole once there is room.
TEST(EventFileWriterTest, AWriteThatFailsPartWayLeavesNoTornRecord) {
  const std::string dir =
      std::string(std::getenv("TEST_TMPDIR")) + "/logs/full/worker-0";
  ASSERT_OK_AND_ASSIGN(auto writer, EventFileWriter::Create(dir));
  ASSERT_OK(writer->AddScalar("loss", 1, 0.5));
  ASSERT_OK(writer->Flush());
  const int64_t whole = FileSize(writer->path());
  ASSERT_GT(whole, 0);

  struct rlimit before;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &before), 0);
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit full = before;
  full.rlim_cur = static_cast<rlim_t>(whole + 100);
  // Nothing below writes to a file but the writer (gtest's output goes
  // to a file too: the checks wait until the limit is lifted).
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &full), 0);
  absl::Status added;
  for (int step = 2; step <= 11 && added.ok(); ++step) {
    added = writer->AddScalar("accuracy/class_2", step, 0.25);
  }
  const absl::Status flushed = writer->Flush();
  const int64_t after_failure = FileSize(writer->path());
  setrlimit(RLIMIT_FSIZE, &before);
  signal(SIGXFSZ, SIG_DFL);

  EXPECT_OK(added);
  EXPECT_THAT(flushed, StatusIs(absl::StatusCode::kDataLoss,
                                HasSubstr("records wait for the next flush")));
  EXPECT_EQ(after_failure, whole) << "a partial record was left behind";
  EXPECT_EQ(ReadEvents(writer->path()).size(), 2u);

  ASSERT_OK(writer->Flush());
  const std::vector<tensorflow::Event> events = ReadEvents(writer->path());
  ASSERT_EQ(events.size(), 12u);
  EXPECT_EQ(events[11].step(), 11);
  EXPECT_EQ(writer->dropped_records(), 0);
}

TEST(EventFileWriterTest, UnwritableDirectoryIsAClearError) {
  EXPECT_THAT(EventFileWriter::Create("/proc/psflow-cannot-exist"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("cannot create directory")));
}

}  // namespace
}  // namespace psflow
