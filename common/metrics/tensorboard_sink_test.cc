#include "common/metrics/tensorboard_sink.h"

#include <sys/resource.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/tensorboard.pb.h"

namespace psflow {
namespace {

using ::testing::Pair;
using ::testing::UnorderedElementsAre;

std::string TestDir(absl::string_view name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
}

// Reads every record back, checking both CRCs (as event_file_writer_test).
std::vector<tensorflow::Event> ReadEvents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  auto fixed32 = [&](size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      v |= uint32_t(uint8_t(bytes[at + i])) << (8 * i);
    }
    return v;
  };
  std::vector<tensorflow::Event> events;
  size_t pos = 0;
  while (pos + 12 <= bytes.size()) {
    uint64_t length = 0;
    for (int i = 0; i < 8; ++i) {
      length |= uint64_t(uint8_t(bytes[pos + i])) << (8 * i);
    }
    EXPECT_EQ(fixed32(pos + 8), MaskCrc32c(Crc32c(bytes.substr(pos, 8))));
    if (pos + 12 + length + 4 > bytes.size()) {
      ADD_FAILURE() << "truncated record at " << pos;
      break;
    }
    const std::string data = bytes.substr(pos + 12, length);
    EXPECT_EQ(fixed32(pos + 12 + length), MaskCrc32c(Crc32c(data)));
    tensorflow::Event event;
    EXPECT_TRUE(event.ParseFromString(data));
    events.push_back(event);
    pos += 12 + length + 4;
  }
  EXPECT_EQ(pos, bytes.size());
  return events;
}

// tag -> value of every scalar after the version record, checking that all
// were written at `step`.
std::map<std::string, float> ScalarsAtStep(
    const std::vector<tensorflow::Event>& events, int64_t step) {
  std::map<std::string, float> scalars;
  for (size_t i = 1; i < events.size(); ++i) {
    EXPECT_EQ(events[i].step(), step);
    for (const tensorflow::Summary::Value& value :
         events[i].summary().value()) {
      EXPECT_TRUE(scalars.emplace(value.tag(), value.simple_value()).second)
          << "tag written twice: " << value.tag();
    }
  }
  return scalars;
}

TEST(TensorBoardSinkTest, SinkWritesEverySeriesAtTheStep) {
  MetricsRegistry registry;
  ASSERT_OK_AND_ASSIGN(
      CounterFamily * pushes,
      registry.Counter("psflow_ps_push_bytes_total", "Bytes.", {"ps", "op"}));
  ASSERT_OK_AND_ASSIGN(CounterCell * ps0, pushes->WithLabels({"0", "push"}));
  ASSERT_OK_AND_ASSIGN(CounterCell * ps1, pushes->WithLabels({"1", "pull"}));
  ps0->Add(1024);
  ps1->Add(0.5);
  ASSERT_OK_AND_ASSIGN(GaugeFamily * workers,
                       registry.Gauge("psflow_chief_workers", "Workers."));
  ASSERT_OK_AND_ASSIGN(GaugeCell * joined, workers->WithLabels({}));
  joined->Set(3);
  ASSERT_OK_AND_ASSIGN(
      HistogramFamily * step_time,
      registry.Histogram("psflow_worker_step_seconds", "Step.", {"job"}, {1}));
  ASSERT_OK_AND_ASSIGN(HistogramCell * train, step_time->WithLabels({"train"}));
  train->Observe(0.25);
  train->Observe(2);

  ASSERT_OK_AND_ASSIGN(auto sink, TensorBoardSink::Create(TestDir("every")));
  ASSERT_OK(sink->Write(registry, 42));

  const std::vector<tensorflow::Event> events = ReadEvents(sink->path());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_THAT(ScalarsAtStep(events, 42),
              UnorderedElementsAre(
                  Pair("psflow_chief_workers", 3.0f),
                  Pair("psflow_ps_push_bytes_total{ps=0,op=push}", 1024.0f),
                  Pair("psflow_ps_push_bytes_total{ps=1,op=pull}", 0.5f),
                  Pair("psflow_worker_step_seconds_sum{job=train}", 2.25f),
                  Pair("psflow_worker_step_seconds_count{job=train}", 2.0f)));
}

TEST(TensorBoardSinkTest, LaterWritesShowTheNewValuesAtTheirStep) {
  MetricsRegistry registry;
  ASSERT_OK_AND_ASSIGN(CounterFamily * family,
                       registry.Counter("psflow_test_total", "help"));
  ASSERT_OK_AND_ASSIGN(CounterCell * counter, family->WithLabels({}));
  ASSERT_OK_AND_ASSIGN(auto sink, TensorBoardSink::Create(TestDir("later")));
  counter->Add(1);
  ASSERT_OK(sink->Write(registry, 10));
  counter->Add(4);
  ASSERT_OK(sink->Write(registry, 20));

  const std::vector<tensorflow::Event> events = ReadEvents(sink->path());
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1].step(), 10);
  EXPECT_EQ(events[1].summary().value(0).simple_value(), 1.0f);
  EXPECT_EQ(events[2].step(), 20);
  EXPECT_EQ(events[2].summary().value(0).simple_value(), 5.0f);
}

TEST(TensorBoardSinkTest, PlainScalarsAreWrittenAsTheRolesWriteThemToday) {
  ASSERT_OK_AND_ASSIGN(auto sink, TensorBoardSink::Create(TestDir("plain")));
  ASSERT_OK(sink->AddScalar("loss", 7, 0.5));
  ASSERT_OK(sink->AddScalar("accuracy", 7, 0.75));
  ASSERT_OK(sink->Flush());

  EXPECT_THAT(
      ScalarsAtStep(ReadEvents(sink->path()), 7),
      UnorderedElementsAre(Pair("loss", 0.5f), Pair("accuracy", 0.75f)));
}

// Lowers RLIMIT_FSIZE for its lifetime, so writes past `bytes` fail with
// EFBIG (SIGXFSZ ignored) the way a full disk would.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    previous_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit = saved_;
    limit.rlim_cur = bytes;
    ok_ = setrlimit(RLIMIT_FSIZE, &limit) == 0;
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, previous_handler_);
  }
  bool ok() const { return ok_; }

 private:
  rlimit saved_;
  void (*previous_handler_)(int);
  bool ok_ = false;
};

TEST(TensorBoardSinkTest, WriteErrorsAreReturned) {
  MetricsRegistry registry;
  ASSERT_OK_AND_ASSIGN(CounterFamily * family,
                       registry.Counter("psflow_test_total", "help", {"i"}));
  for (int i = 0; i < 1000; ++i) {
    ASSERT_OK(family->WithLabels({absl::StrCat(i)}).status());
  }
  ASSERT_OK_AND_ASSIGN(auto sink, TensorBoardSink::Create(TestDir("full")));
  absl::Status written;
  {
    // The version record is already on disk; nothing more fits.
    FileSizeLimit limit(1);
    ASSERT_TRUE(limit.ok());
    written = sink->Write(registry, 1);
  }
  EXPECT_THAT(written, StatusIs(absl::StatusCode::kDataLoss));
}

TEST(TensorBoardSinkTest, TagsReadLikePrometheusSeries) {
  FamilySnapshot family;
  family.name = "psflow_ps_push_bytes_total";
  EXPECT_EQ(TensorBoardTag(family, SeriesSnapshot()),
            "psflow_ps_push_bytes_total");
  family.label_names = {"ps", "shard"};
  SeriesSnapshot series;
  series.label_values = {"0", "3"};
  EXPECT_EQ(TensorBoardTag(family, series),
            "psflow_ps_push_bytes_total{ps=0,shard=3}");
  EXPECT_EQ(TensorBoardTag(family, series, "_sum"),
            "psflow_ps_push_bytes_total_sum{ps=0,shard=3}");
}

}  // namespace
}  // namespace psflow
