// Turns SIGINT/SIGTERM (optionally SIGHUP) into an ordinary callback on a
// dedicated thread, so servers shut down through their normal path (never from
// a signal handler).
//
//   int main() {
//     BlockTerminationSignals();  // first, before any thread starts
//     ... start servers ...
//     WatchTerminationSignals([&](const std::string& name) { ... });
#ifndef PSFLOW_COMMON_SIGNALS_H_
#define PSFLOW_COMMON_SIGNALS_H_

#include <sys/types.h>

#include <functional>
#include <string>

#include "absl/time/time.h"
#include "common/clock.h"

namespace psflow {

// What SIGHUP does to a process that watches for termination signals.
enum class Hangup {
  // Its default action (the process ends at once): servers have no
  // terminal to lose.
  kDefault,
  // A stop like SIGTERM: for a process started from a terminal (psctl
  // local, a role run by hand over ssh), whose closing sends SIGHUP. A
  // process started with SIGHUP ignored (nohup) keeps ignoring it.
  kStop,
};

// The number of a signal WatchTerminationSignals names ("SIGINT",
// "SIGTERM", "SIGHUP"); a process it ends exits 128 + this, as the shell
// reports a process killed by it.
int TerminationSignalNumber(const std::string& name);

// Blocks SIGINT and SIGTERM (and SIGHUP with Hangup::kStop) in the calling
// thread; threads started later inherit the mask, so no thread dies of
// the default action.
void BlockTerminationSignals(Hangup hangup = Hangup::kDefault);

// Starts a detached thread that calls `on_signal` with "SIGINT",
// "SIGTERM" (or "SIGHUP" with Hangup::kStop) each time one arrives,
// whichever thread the kernel delivers it to (a handler passes it on;
// threads that libraries started before main() have not blocked it).
// Call once, after BlockTerminationSignals() with the same `hangup`.
void WatchTerminationSignals(std::function<void(const std::string&)> on_signal,
                             Hangup hangup = Hangup::kDefault);

// Linux sends a child its parent-death signal (prctl PR_SET_PDEATHSIG)
// again each time the child passes to another thread of its exiting
// parent, so one death of a multithreaded parent (psctl local killed with
// SIGKILL) arrives as a burst of SIGTERMs, which a process that takes a
// second signal as "stop at once" must not read as two requests.
// WatchTerminationSignals drops them through this: a signal the parent
// sent again (same signal, from the pid that started this process, at
// most kBurst after the last one it passed on) is a repeat when the parent
// has exited or is exiting; `parent_gone` is asked until `kSettle` has
// passed, so a deliberate second signal of a living parent still counts.
class ParentDeathRepeats {
 public:
  static constexpr absl::Duration kBurst = absl::Seconds(1);
  static constexpr absl::Duration kSettle = absl::Milliseconds(500);

  ParentDeathRepeats(pid_t parent, std::function<bool()> parent_gone,
                     Clock* clock);

  // `code` and `sender` as in siginfo_t's si_code and si_pid.
  bool IsRepeat(int signal_number, int code, pid_t sender);

 private:
  const pid_t parent_;
  const std::function<bool()> parent_gone_;
  Clock* const clock_;
  int last_signal_ = 0;
  absl::Time last_at_ = absl::InfinitePast();
};

// Whether `pid` has exited: gone, or a zombie nobody has reaped yet.
bool ProcessEnded(pid_t pid);

}  // namespace psflow

#endif  // PSFLOW_COMMON_SIGNALS_H_
