#include "common/process_setup.h"

#include <malloc.h>

#include <cstdlib>
#include <string>
#include <utility>

#include "absl/flags/parse.h"
#include "absl/synchronization/mutex.h"
#include "common/float_mode.h"
#include "common/logging.h"
#include "common/role_help.h"
#include "common/signals.h"

namespace psflow {

void SetUpProcessForBulkTransfers() {
  // Serve allocations up to 512 MiB from the heap and keep up to 1 GiB of
  // freed memory instead of returning it to the kernel.
  mallopt(M_MMAP_THRESHOLD, 512 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // Per-thread arenas live in 64 MiB heaps that glibc unmaps whenever they
  // empty, whatever the trim threshold: every burst of receive buffers
  // would fault fresh pages in again. One arena keeps them.
  mallopt(M_ARENA_MAX, 1);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

void StartRoleProcess(int argc, char** argv, absl::string_view usage) {
  StartRoleProcess(argc, argv, usage, [](const std::string& signal) {
    LOG(ERROR) << "received " << signal << "; exiting";
    std::_Exit(128 + TerminationSignalNumber(signal));
  });
}

void StartRoleProcess(int argc, char** argv, absl::string_view usage,
                      std::function<void(const std::string&)> on_signal) {
  HandleHelpRequest(argc, argv, usage);
  BlockTerminationSignals(Hangup::kStop);
  EnableFlushToZero();
  SetUpProcessForBulkTransfers();
  absl::ParseCommandLine(argc, argv);
  WatchTerminationSignals(std::move(on_signal), Hangup::kStop);
}

}  // namespace psflow
