// Line-oriented process logging: `LOG(INFO) << "pulled " << n << " bytes";`
//
// Every line is written with a single write(2) to stderr, so lines from
// threads (and from processes sharing a terminal) never interleave, and is
// prefixed with severity, UTC time and the process's tag:
//
//   I2026-11-21 22:10:03.123 ps-0] pulled 4096 bytes
//
// The tag names the role and index (SetLogTag("worker-1")); the local
// cluster launcher and Kubernetes logs rely on it. LOG(FATAL) and failed
// CHECKs abort after logging: use them only for psflow's own invariants,
// never for input, config, network or file contents (return a Status).
//
// Abseil 20220623 has no absl/log; the macro names match it so this header
// can be replaced by absl/log later. Thread-safe.
#ifndef PSFLOW_COMMON_LOGGING_H_
#define PSFLOW_COMMON_LOGGING_H_

#include <sstream>
#include <string>

#include "absl/strings/string_view.h"

namespace psflow {

enum class LogSeverity { kInfo = 0, kWarning = 1, kError = 2, kFatal = 3 };

// Sets the tag printed on every line (e.g. "chief-0"); empty by default.
void SetLogTag(absl::string_view tag);

// Lines below `severity` are dropped. Default: kInfo.
void SetMinLogSeverity(LogSeverity severity);

// Where lines go; the default writes to stderr. Tests capture lines with it.
// Passing nullptr restores the default. The sink must be thread-safe.
using LogSink = void (*)(absl::string_view line);
void SetLogSink(LogSink sink);

namespace logging_internal {

// Collects one line and emits it on destruction.
class LogMessage {
 public:
  LogMessage(const char* file, int line, LogSeverity severity);
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  ~LogMessage();

  std::ostream& stream() { return stream_; }

 private:
  const char* file_;
  int line_;
  LogSeverity severity_;
  std::ostringstream stream_;
};

// Makes `cond ? (void)0 : LogMessage(...).stream() << ...` type-check.
struct Voidify {
  void operator&(std::ostream&) {}
};

bool ShouldLog(LogSeverity severity);

}  // namespace logging_internal
}  // namespace psflow

#define PSFLOW_LOG_SEVERITY_INFO ::psflow::LogSeverity::kInfo
#define PSFLOW_LOG_SEVERITY_WARNING ::psflow::LogSeverity::kWarning
#define PSFLOW_LOG_SEVERITY_ERROR ::psflow::LogSeverity::kError
#define PSFLOW_LOG_SEVERITY_FATAL ::psflow::LogSeverity::kFatal

#define LOG(severity)                                                    \
  !::psflow::logging_internal::ShouldLog(PSFLOW_LOG_SEVERITY_##severity) \
      ? (void)0                                                          \
      : ::psflow::logging_internal::Voidify() &                          \
            ::psflow::logging_internal::LogMessage(                      \
                __FILE__, __LINE__, PSFLOW_LOG_SEVERITY_##severity)      \
                .stream()

// Aborts with the condition text when `cond` is false. Only for invariants.
#define CHECK(cond)                                                   \
  (cond) ? (void)0                                                    \
         : ::psflow::logging_internal::Voidify() &                    \
               ::psflow::logging_internal::LogMessage(                \
                   __FILE__, __LINE__, ::psflow::LogSeverity::kFatal) \
                       .stream()                                      \
                   << "Check failed: " #cond " "

#endif  // PSFLOW_COMMON_LOGGING_H_
