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

#include <functional>
#include <string>

namespace psflow {

// What SIGHUP does to a process that watches for termination signals.
enum class Hangup {
  // Its default action (the process ends at once): servers have no
  // terminal to lose.
  kDefault,
  // A stop like SIGTERM: for a process started from a terminal (psctl
  // local), whose closing sends SIGHUP.
  kStop,
};

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

}  // namespace psflow

#endif  // PSFLOW_COMMON_SIGNALS_H_
