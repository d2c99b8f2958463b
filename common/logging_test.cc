#include "common/logging.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/base/const_init.h"
#include "common/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using ::testing::StartsWith;

Mutex captured_mu(absl::kConstInit);
std::vector<std::string>* captured ABSL_GUARDED_BY(captured_mu) = nullptr;

void CaptureLine(absl::string_view line) {
  MutexLock lock(&captured_mu);
  captured->emplace_back(line);
}

class LoggingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MutexLock lock(&captured_mu);
    captured = new std::vector<std::string>;
    SetLogSink(&CaptureLine);
    SetLogTag("");
    SetMinLogSeverity(LogSeverity::kInfo);
  }
  void TearDown() override {
    SetLogSink(nullptr);
    MutexLock lock(&captured_mu);
    delete captured;
    captured = nullptr;
  }
  std::vector<std::string> Lines() {
    MutexLock lock(&captured_mu);
    return *captured;
  }
};

TEST_F(LoggingTest, LineHasSeverityTimeTagAndOneNewline) {
  SetLogTag("ps-1");
  LOG(INFO) << "pulled " << 42 << " bytes";
  std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0],
              MatchesRegex("I[0-9]{4}-[0-9]{2}-[0-9]{2} "
                           "[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3} ps-1\\] "
                           "pulled 42 bytes\n"));
}

TEST_F(LoggingTest, ErrorsCarryTheSourceLocation) {
  LOG(ERROR) << "bad thing";
  std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], StartsWith("E"));
  EXPECT_THAT(lines[0], HasSubstr("logging_test.cc:"));
  EXPECT_THAT(lines[0], EndsWith("] bad thing\n"));
}

TEST_F(LoggingTest, TrailingNewlinesInTheMessageDoNotSplitTheLine) {
  LOG(WARNING) << "ends with newlines\n\n";
  std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], EndsWith("] ends with newlines\n"));
}

TEST_F(LoggingTest, LinesBelowTheMinimumSeverityAreDropped) {
  SetMinLogSeverity(LogSeverity::kWarning);
  int evaluated = 0;
  LOG(INFO) << "dropped " << ++evaluated;
  LOG(WARNING) << "kept";
  std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("kept"));
  EXPECT_EQ(evaluated, 0) << "a dropped line must not evaluate its operands";
}

TEST_F(LoggingTest, ConcurrentLinesNeverInterleave) {
  constexpr int kThreads = 8;
  constexpr int kLinesPerThread = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < kLinesPerThread; ++i) {
        LOG(INFO) << "thread " << t << " line " << i << " end";
      }
    });
  }
  for (auto& thread : threads) thread.join();
  std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), static_cast<size_t>(kThreads * kLinesPerThread));
  for (const std::string& line : lines) {
    EXPECT_THAT(line, MatchesRegex(".*\\] thread [0-9] line [0-9]+ end\n"));
  }
}

TEST(LoggingDeathTest, FailedCheckAbortsWithTheCondition) {
  int value = 3;
  EXPECT_DEATH(CHECK(value == 4) << "value was " << value,
               "Check failed: value == 4 value was 3");
}

TEST(LoggingDeathTest, PassingCheckDoesNothing) {
  CHECK(1 + 1 == 2) << "arithmetic";
  SUCCEED();
}

TEST_F(LoggingTest, FatalIsNeverFilteredOut) {
  SetMinLogSeverity(LogSeverity::kFatal);
  LOG(ERROR) << "dropped";
  EXPECT_THAT(Lines(), Not(testing::Contains(HasSubstr("dropped"))));
}

}  // namespace
}  // namespace psflow
