// Turns SIGINT/SIGTERM into an ordinary callback on a dedicated thread, so
// servers shut down through their normal path (never from a signal
// handler).
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

// Blocks SIGINT and SIGTERM in the calling thread; threads started later
// inherit the mask, so no thread dies of the default action.
void BlockTerminationSignals();

// Starts a detached thread that calls `on_signal` with "SIGINT" or
// "SIGTERM" each time one arrives, whichever thread the kernel delivers it
// to (a handler passes it on; threads that libraries started before
// main() have not blocked it). Call once, after BlockTerminationSignals().
void WatchTerminationSignals(std::function<void(const std::string&)> on_signal);

}  // namespace psflow

#endif  // PSFLOW_COMMON_SIGNALS_H_
