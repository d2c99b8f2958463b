#include "common/fault_point.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/mutex.h"

namespace psflow {
namespace {

// At most this long: a typo must not freeze a process for hours.
constexpr absl::Duration kLongestPause = absl::Minutes(1);

struct FaultPoints {
  std::map<std::string, FaultPause> pauses;
  Mutex mu;
  std::map<std::string, int> hits ABSL_GUARDED_BY(mu);
};

FaultPoints& Configured() {
  static FaultPoints* points = [] {
    auto* p = new FaultPoints;
    const char* spec = std::getenv("PSFLOW_FAULT_POINTS");
    if (spec == nullptr || *spec == '\0') return p;
    absl::StatusOr<std::map<std::string, FaultPause>> parsed =
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

absl::StatusOr<std::map<std::string, FaultPause>> ParseFaultPoints(
    absl::string_view spec) {
  std::map<std::string, FaultPause> pauses;
  for (absl::string_view entry :
       absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    entry = absl::StripAsciiWhitespace(entry);
    std::pair<absl::string_view, absl::string_view> parts =
        absl::StrSplit(entry, absl::MaxSplits('=', 1));
    std::pair<absl::string_view, absl::string_view> when =
        absl::StrSplit(parts.second, absl::MaxSplits('@', 1));
    FaultPause pause;
    const bool hit_ok =
        when.second.empty() || (absl::SimpleAtoi(when.second, &pause.hit) &&
                                pause.hit >= 1 && pause.hit <= 1000000);
    if (parts.first.empty() || when.first.empty() || !hit_ok ||
        !absl::ParseDuration(when.first, &pause.pause) ||
        pause.pause < absl::ZeroDuration() || pause.pause > kLongestPause) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad entry \"", entry,
          "\": write name=duration[@hit] (e.g. chief.final_save=2s or "
          "ps.save_shard=1s@2), each pause at most ",
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
    if (++points.hits[it->first] != it->second.hit) return;
  }
  LOG(INFO) << "fault point " << name << ": pausing "
            << absl::FormatDuration(it->second.pause);
  RealClock().SleepFor(it->second.pause);
}

}  // namespace psflow
