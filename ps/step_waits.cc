#include "ps/step_waits.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/mutex.h"

namespace psflow {

absl::Status AwaitStep(const std::vector<StepWait>& waits, int64_t step,
                       absl::string_view what, absl::Time deadline,
                       const std::function<bool()>& cancelled) {
  struct Pending {
    Mutex mu;
    int count ABSL_GUARDED_BY(mu) = 0;
  };
  // Shared with the callbacks, which may fire after this returns.
  auto pending = std::make_shared<Pending>();
  std::vector<std::pair<const StepWait*, uint64_t>> registered;
  for (const StepWait& wait : waits) {
    {
      MutexLock lock(&pending->mu);
      ++pending->count;
    }
    std::optional<uint64_t> id = wait.register_wait([pending] {
      MutexLock lock(&pending->mu);
      --pending->count;
    });
    if (id.has_value()) {
      registered.emplace_back(&wait, *id);
    } else {
      MutexLock lock(&pending->mu);
      --pending->count;
    }
  }
  bool reached = false, stopped = false;
  while (!reached && !stopped && absl::Now() < deadline) {
    MutexLock lock(&pending->mu);
    reached = pending->mu.AwaitWithDeadline(
        Condition(
            +[](int* count) { return *count == 0; }, &pending->count),
        std::min(deadline, absl::Now() + absl::Milliseconds(100)));
    stopped = cancelled != nullptr && cancelled();
  }
  if (reached) return absl::OkStatus();
  for (const auto& [wait, id] : registered) wait->cancel(id);
  if (stopped) {
    return absl::CancelledError(
        "the parameter server is shutting down; checkpoint abandoned");
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "the checkpoint waited for every ", what, " to reach step ", step,
      " but some are still behind; the workers of that step may be slow or "
      "gone"));
}

}  // namespace psflow
