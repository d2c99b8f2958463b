#include "common/signals.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "common/logging.h"

namespace psflow {
namespace {

sigset_t TerminationSignals(Hangup hangup) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  if (hangup == Hangup::kStop) sigaddset(&set, SIGHUP);
  return set;
}

const char* SignalName(int signal_number) {
  switch (signal_number) {
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "SIGTERM";
  }
}

}  // namespace

void BlockTerminationSignals(Hangup hangup) {
  sigset_t set = TerminationSignals(hangup);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

namespace {

// Written by the handler, read by the watch thread.
int signal_pipe[2] = {-1, -1};

void WriteSignalNumber(int signal_number) {
  const int saved_errno = errno;
  const unsigned char byte = static_cast<unsigned char>(signal_number);
  // Async-signal-safe; a full pipe drops the signal (one is enough).
  [[maybe_unused]] ssize_t written = write(signal_pipe[1], &byte, 1);
  errno = saved_errno;
}

}  // namespace

// A handler rather than sigwait() alone: threads that libraries start
// before main() (OpenBLAS's pool) never blocked the signals, and the
// kernel may deliver a process-directed signal to any of them, where the
// default action would end the process without the orderly stop. With a
// handler, whichever thread receives it only writes to a pipe.
void WatchTerminationSignals(std::function<void(const std::string&)> on_signal,
                             Hangup hangup) {
  if (pipe2(signal_pipe, O_CLOEXEC) != 0) {
    LOG(ERROR) << "cannot watch SIGINT/SIGTERM (pipe: " << std::strerror(errno)
               << "); they end the process at once";
    return;
  }
  struct sigaction action = {};
  action.sa_handler = WriteSignalNumber;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  if (hangup == Hangup::kStop) sigaction(SIGHUP, &action, nullptr);
  std::thread([on_signal = std::move(on_signal), hangup] {
    // This thread takes the signals the others block.
    sigset_t set = TerminationSignals(hangup);
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    while (true) {
      unsigned char byte = 0;
      const ssize_t n = read(signal_pipe[0], &byte, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n != 1) return;
      on_signal(SignalName(byte));
    }
  }).detach();
}

}  // namespace psflow
