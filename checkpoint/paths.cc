#include "checkpoint/paths.h"

#include <random>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace psflow {

std::string CheckpointName(int64_t step) { return absl::StrCat("ckpt-", step); }

std::optional<int64_t> ParseCheckpointName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, "ckpt-") || name.empty()) return std::nullopt;
  for (char c : name) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  int64_t step;
  if (!absl::SimpleAtoi(name, &step)) return std::nullopt;
  return step;
}

std::string TemporaryCheckpointName() {
  std::random_device random;
  return absl::StrFormat("ckpt.tmp-%08x%08x", random(), random());
}

bool IsTemporaryCheckpointName(absl::string_view name) {
  return absl::StartsWith(name, "ckpt.tmp-");
}

std::string DataFileName(int ps, int num_ps) {
  return absl::StrFormat("data-%05d-of-%05d", ps, num_ps);
}

std::string JoinPath(absl::string_view dir, absl::string_view name) {
  if (dir.empty()) return std::string(name);
  if (absl::EndsWith(dir, "/")) return absl::StrCat(dir, name);
  return absl::StrCat(dir, "/", name);
}

}  // namespace psflow
