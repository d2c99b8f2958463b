// One job, one chief: which chief may control a parameter server.
//
// Every chief process draws a random incarnation when it starts and sends
// it with each of its calls (TransportSecurity::chief_incarnation). The
// first incarnation a server hears owns it; the owner's calls are its sign
// of life. Another incarnation is refused (ABORTED, naming the owner) while
// the owner keeps calling, so a stray second chief, or an old one that
// comes back, can neither reconfigure, restore, hold nor shut down a
// running job. Once the owner has been silent for `takeover_after` (it
// died, or hangs), the next incarnation that calls takes over, and from
// then on the old one is refused: a restarted chief resumes the job, a
// stale one cannot roll it back. A call of the owner that runs long (a
// save, a restore) counts as calling until it ends.
//
// Calls without an incarnation count as the incarnation "" (tools and
// tests that talk to a server directly). Thread-safe.
#ifndef PSFLOW_PS_CHIEF_FENCE_H_
#define PSFLOW_PS_CHIEF_FENCE_H_

#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/mutex.h"

namespace psflow {

class ChiefFence {
 public:
  explicit ChiefFence(absl::Duration takeover_after)
      : takeover_after_(takeover_after) {}

  // OK when `incarnation` owns the server, or takes it over now (logged);
  // the call then counts as the owner's sign of life. ABORTED naming the
  // owner, and when it could be taken over, otherwise. `method` is named
  // in the message.
  absl::Status Admit(absl::string_view incarnation, absl::string_view method,
                     absl::Time now);

  // Brackets an admitted call that runs long: the owner counts as calling
  // until it ends.
  void CallStarted();
  void CallEnded(absl::Time now);

  // How long the owner has been silent; nullopt before any chief called
  // and while one of its long calls runs.
  std::optional<absl::Duration> OwnerSilence(absl::Time now) const;

  // The owner's incarnation; nullopt before any chief called.
  std::optional<std::string> owner() const;

 private:
  const absl::Duration takeover_after_;
  mutable Mutex mu_;
  std::optional<std::string> owner_ ABSL_GUARDED_BY(mu_);
  absl::Time last_call_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int calls_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace psflow

#endif  // PSFLOW_PS_CHIEF_FENCE_H_
