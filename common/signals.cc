#include "common/signals.h"

#include <pthread.h>
#include <signal.h>

#include <thread>

namespace psflow {
namespace {

sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

void BlockTerminationSignals() {
  sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void WatchTerminationSignals(
    std::function<void(const std::string&)> on_signal) {
  std::thread([on_signal = std::move(on_signal)] {
    sigset_t set = TerminationSignals();
    while (true) {
      int signal_number = 0;
      if (sigwait(&set, &signal_number) != 0) continue;
      on_signal(signal_number == SIGINT ? "SIGINT" : "SIGTERM");
    }
  }).detach();
}

}  // namespace psflow
