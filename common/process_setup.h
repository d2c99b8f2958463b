// Process-wide settings every psflow binary applies first thing in main().
#ifndef PSFLOW_COMMON_PROCESS_SETUP_H_
#define PSFLOW_COMMON_PROCESS_SETUP_H_

#include <functional>
#include <string>

#include "absl/strings/string_view.h"

namespace psflow {

// - Keeps freed large blocks in the heap for reuse (glibc otherwise maps
//   every allocation above 128 KiB freshly and unmaps it on free, and
//   unmaps empty per-thread arenas, so each received message would
//   page-fault its way in at ~2 GB/s).
// - Turns off abseil's mutex deadlock detection, which Debian's build
//   leaves on and which costs a graph lookup per lock; lock order is
//   checked by clang's thread-safety analysis and tests instead.
void SetUpProcessForBulkTransfers();

// The start of a role binary's main() (worker, evaluator, chief): answers
// --help with `usage` and the role's flags and exits 0 (role_help.h); blocks
// SIGINT/SIGTERM and sets flush-to-zero (common/float_mode.h) before any
// thread starts, so every thread inherits both, applies
// SetUpProcessForBulkTransfers(), parses flags, and exits the process
// (status 128 + the signal, after a log line) when SIGINT, SIGTERM or
// SIGHUP (a closed terminal; not under nohup) arrives. Roles that shut
// down gracefully instead (ps_server) do these steps themselves.
void StartRoleProcess(int argc, char** argv, absl::string_view usage);
// The same, with `on_signal` called (on a thread of its own, with "SIGINT",
// "SIGTERM" or "SIGHUP") instead of exiting: for a role that saves its
// work first.
void StartRoleProcess(int argc, char** argv, absl::string_view usage,
                      std::function<void(const std::string&)> on_signal);

}  // namespace psflow

#endif  // PSFLOW_COMMON_PROCESS_SETUP_H_
