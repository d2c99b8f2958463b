#include "common/logging.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/base/const_init.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/mutex.h"

namespace psflow {
namespace {

Mutex tag_mu(absl::kConstInit);
std::string* tag ABSL_GUARDED_BY(tag_mu) = nullptr;
std::atomic<int> min_severity{static_cast<int>(LogSeverity::kInfo)};
std::atomic<LogSink> sink{nullptr};

constexpr char kSeverityLetters[] = "IWEF";

// Writes all of `line`, retrying short writes; a logger has nowhere to
// report its own failure, so errors other than EINTR are dropped.
void WriteToStderr(absl::string_view line) {
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

std::string CurrentTag() {
  MutexLock lock(&tag_mu);
  return tag == nullptr ? std::string() : *tag;
}

}  // namespace

void SetLogTag(absl::string_view new_tag) {
  MutexLock lock(&tag_mu);
  if (tag == nullptr) tag = new std::string;
  tag->assign(new_tag.data(), new_tag.size());
}

void SetMinLogSeverity(LogSeverity severity) {
  min_severity.store(static_cast<int>(severity));
}

void SetLogSink(LogSink new_sink) { sink.store(new_sink); }

namespace logging_internal {

bool ShouldLog(LogSeverity severity) {
  return static_cast<int>(severity) >= min_severity.load() ||
         severity == LogSeverity::kFatal;
}

LogMessage::LogMessage(const char* file, int line, LogSeverity severity)
    : file_(file), line_(line), severity_(severity) {}

LogMessage::~LogMessage() {
  std::string out;
  out.push_back(kSeverityLetters[static_cast<int>(severity_)]);
  out +=
      absl::FormatTime("%Y-%m-%d %H:%M:%E3S", absl::Now(), absl::UTCTimeZone());
  const std::string current_tag = CurrentTag();
  if (!current_tag.empty()) {
    out.push_back(' ');
    out += current_tag;
  }
  if (severity_ >= LogSeverity::kError) {
    // Errors carry their source location; routine lines stay short.
    const char* base = std::strrchr(file_, '/');
    out += ' ';
    out += base ? base + 1 : file_;
    out += ':' + std::to_string(line_);
  }
  out += "] ";
  std::string text = stream_.str();
  // One event per line: a newline inside the message would split it.
  while (!text.empty() && text.back() == '\n') text.pop_back();
  out += text;
  out.push_back('\n');
  LogSink current = sink.load();
  if (current != nullptr) {
    current(out);
  } else {
    WriteToStderr(out);
  }
  if (severity_ == LogSeverity::kFatal) std::abort();
}

}  // namespace logging_internal
}  // namespace psflow
