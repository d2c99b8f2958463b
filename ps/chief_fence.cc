#include "ps/chief_fence.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace psflow {
namespace {

std::string Name(absl::string_view incarnation) {
  return incarnation.empty() ? std::string("(none)") : std::string(incarnation);
}

std::string Seconds(absl::Duration d) {
  return absl::FormatDuration(absl::Trunc(d, absl::Milliseconds(100)));
}

}  // namespace

absl::Status ChiefFence::Admit(absl::string_view incarnation,
                               absl::string_view method, absl::Time now) {
  MutexLock lock(&mu_);
  if (owner_.has_value() && *owner_ != incarnation) {
    const absl::Duration silent = now - last_call_;
    if (calls_in_flight_ > 0 || silent <= takeover_after_) {
      return absl::AbortedError(absl::StrCat(
          method, " refused: this parameter server follows chief incarnation ",
          Name(*owner_), ", which ",
          calls_in_flight_ > 0
              ? "has a call in progress"
              : absl::StrCat("called ", Seconds(silent), " ago"),
          "; the caller (chief incarnation ", Name(incarnation),
          ") is a second or stale chief of this job. Stop it; a chief "
          "restarted after a crash takes over once the old one has been "
          "silent for ",
          Seconds(takeover_after_), " (ps_server --chief_takeover_s)"));
    }
    LOG(WARNING) << "chief incarnation " << Name(incarnation)
                 << " takes over from " << Name(*owner_) << ", silent for "
                 << Seconds(silent) << "; calls of the old one are refused";
  } else if (!owner_.has_value()) {
    LOG(INFO) << "following chief incarnation " << Name(incarnation);
  }
  owner_ = std::string(incarnation);
  last_call_ = std::max(last_call_, now);
  return absl::OkStatus();
}

void ChiefFence::CallStarted() {
  MutexLock lock(&mu_);
  ++calls_in_flight_;
}

void ChiefFence::CallEnded(absl::Time now) {
  MutexLock lock(&mu_);
  --calls_in_flight_;
  last_call_ = std::max(last_call_, now);
}

std::optional<absl::Duration> ChiefFence::OwnerSilence(absl::Time now) const {
  MutexLock lock(&mu_);
  if (!owner_.has_value() || calls_in_flight_ > 0) return std::nullopt;
  return now - last_call_;
}

std::optional<std::string> ChiefFence::owner() const {
  MutexLock lock(&mu_);
  return owner_;
}

}  // namespace psflow
