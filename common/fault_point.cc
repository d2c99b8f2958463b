#include "common/fault_point.h"

#include <cstdlib>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/logging.h"
#include "common/mutex.h"

namespace psflow {
namespace {

// At most this long: a typo must not freeze a process for hours.
constexpr absl::Duration kLongestPause = absl::Minutes(1);

struct FaultPoints {
  Mutex mu;
  std::map<std::string, absl::Duration> pauses;
  std::set<std::string> hit ABSL_GUARDED_BY(mu);
};

FaultPoints& Configured() {
  static FaultPoints* points = [] {
    auto* p = new FaultPoints;
    const char* spec = std::getenv("PSFLOW_FAULT_POINTS");
    if (spec == nullptr || *spec == '\0') return p;
    absl::StatusOr<std::map<std::string, absl::Duration>> parsed =
        ParseFaultPoints(spec);
    if (!parsed.ok()) {
      LOG(WARNING) << "PSFLOW_FAULT_POINTS ignored: "
                   << parsed.status().message();
      return p;
    }
    p->pauses = *std::move(parsed);
    return p;
  }();
  return *points;
}

}  // namespace

absl::StatusOr<std::map<std::string, absl::Duration>> ParseFaultPoints(
    absl::string_view spec) {
  std::map<std::string, absl::Duration> pauses;
  for (absl::string_view entry :
       absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    entry = absl::StripAsciiWhitespace(entry);
    std::pair<absl::string_view, absl::string_view> parts =
        absl::StrSplit(entry, absl::MaxSplits('=', 1));
    absl::Duration pause;
    if (parts.first.empty() || parts.second.empty() ||
        !absl::ParseDuration(parts.second, &pause) ||
        pause < absl::ZeroDuration() || pause > kLongestPause) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad entry \"", entry,
          "\": write name=duration (e.g. chief.final_save=2s), each pause "
          "at most ",
          absl::FormatDuration(kLongestPause)));
    }
    pauses[std::string(parts.first)] = pause;
  }
  return pauses;
}

void FaultPoint(absl::string_view name) {
  FaultPoints& points = Configured();
  if (points.pauses.empty()) return;
  auto it = points.pauses.find(std::string(name));
  if (it == points.pauses.end()) return;
  {
    MutexLock lock(&points.mu);
    if (!points.hit.insert(it->first).second) return;
  }
  LOG(INFO) << "fault point " << name << ": pausing "
            << absl::FormatDuration(it->second);
  absl::SleepFor(it->second);
}

}  // namespace psflow
