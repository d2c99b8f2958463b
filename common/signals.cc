#include "common/signals.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
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

bool IgnoredAtStart(int signal_number) {
  struct sigaction current;
  return sigaction(signal_number, nullptr, &current) == 0 &&
         current.sa_handler == SIG_IGN;
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

int TerminationSignalNumber(const std::string& name) {
  return name == "SIGINT" ? SIGINT : name == "SIGHUP" ? SIGHUP : SIGTERM;
}

void BlockTerminationSignals(Hangup hangup) {
  sigset_t set = TerminationSignals(hangup);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

namespace {

// Written by the handler, read by the watch thread.
int signal_pipe[2] = {-1, -1};

// One received signal, as the handler writes it (well under PIPE_BUF, so
// each write is whole).
struct Received {
  int signal_number;
  int code;
  pid_t sender;
};

void WriteSignal(int signal_number, siginfo_t* info, void*) {
  const int saved_errno = errno;
  const Received received{signal_number, info != nullptr ? info->si_code : 0,
                          info != nullptr ? info->si_pid : 0};
  // Async-signal-safe; a full pipe drops the signal (one is enough).
  [[maybe_unused]] ssize_t written =
      write(signal_pipe[1], &received, sizeof(received));
  errno = saved_errno;
}

}  // namespace

bool ProcessEnded(pid_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return true;
  // "pid (name) state ...": the name may hold spaces and parentheses.
  const size_t name_end = line.rfind(')');
  if (name_end == std::string::npos || name_end + 2 >= line.size()) {
    return false;
  }
  const char state = line[name_end + 2];
  return state == 'Z' || state == 'X';
}

ParentDeathRepeats::ParentDeathRepeats(pid_t parent,
                                       std::function<bool()> parent_gone,
                                       Clock* clock)
    : parent_(parent), parent_gone_(std::move(parent_gone)), clock_(clock) {}

bool ParentDeathRepeats::IsRepeat(int signal_number, int code, pid_t sender) {
  if (code != SI_USER || sender != parent_ || parent_ <= 1) return false;
  const absl::Time now = clock_->Now();
  const bool candidate =
      signal_number == last_signal_ && now - last_at_ <= kBurst;
  if (candidate) {
    const absl::Time settle = now + kSettle;
    while (true) {
      if (parent_gone_()) return true;
      if (clock_->Now() >= settle) break;
      clock_->SleepFor(absl::Milliseconds(10));
    }
  }
  last_signal_ = signal_number;
  last_at_ = now;
  return false;
}

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
  action.sa_sigaction = WriteSignal;
  action.sa_flags = SA_RESTART | SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  // nohup's ignored SIGHUP stays ignored: whoever started it so asked
  // for the process to outlive its terminal.
  if (hangup == Hangup::kStop && !IgnoredAtStart(SIGHUP)) {
    sigaction(SIGHUP, &action, nullptr);
  }
  const pid_t parent = getppid();
  std::thread([on_signal = std::move(on_signal), hangup, parent] {
    // This thread takes the signals the others block.
    sigset_t set = TerminationSignals(hangup);
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    ParentDeathRepeats repeats(
        parent,
        [parent] { return getppid() != parent || ProcessEnded(parent); },
        &RealClock());
    while (true) {
      Received received;
      const ssize_t n = read(signal_pipe[0], &received, sizeof(received));
      if (n < 0 && errno == EINTR) continue;
      if (n != static_cast<ssize_t>(sizeof(received))) return;
      const char* name = SignalName(received.signal_number);
      if (repeats.IsRepeat(received.signal_number, received.code,
                           received.sender)) {
        LOG(INFO) << "ignoring " << name << " repeated by the exiting parent "
                  << parent << " (one parent-death signal)";
        continue;
      }
      on_signal(name);
    }
  }).detach();
}

}  // namespace psflow
