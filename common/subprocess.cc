#include "common/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"

extern char** environ;

namespace psflow {

void ResetSignalsForExec() {
  // Ignored signals stay ignored across exec, as they would without this.
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction old;
    if (sig == SIGKILL || sig == SIGSTOP ||
        sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN ||
        old.sa_handler == SIG_DFL) {
      continue;
    }
    struct sigaction fallback = {};
    fallback.sa_handler = SIG_DFL;
    sigaction(sig, &fallback, nullptr);
  }
  // Undo any signal mask the parent set (a test's, a sigwait thread's).
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

Subprocess::Subprocess(std::vector<std::string> argv,
                       std::map<std::string, std::string> env,
                       std::string log_path)
    : argv_(std::move(argv)),
      env_(std::move(env)),
      log_path_(std::move(log_path)) {}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGKILL);
    int status;
    waitpid(pid_, &status, 0);
  }
  if (output_fd_ >= 0) close(output_fd_);
  if (exit_fd_ >= 0) close(exit_fd_);
}

absl::Status Subprocess::Start() {
  if (argv_.empty()) return absl::InvalidArgumentError("no program to run");
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq != std::string::npos)
      env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [key, value] : env_) env[key] = value;
  std::vector<std::string> env_strings;
  for (const auto& [key, value] : env) env_strings.push_back(key + "=" + value);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  for (auto& s : argv_) argv.push_back(s.data());
  argv.push_back(nullptr);

  // The child writes execve's errno here when it fails; a successful
  // execve closes it (O_CLOEXEC), so end of file means the program runs.
  // The child's copy of exit_pipe[1] (with set_watch_exit) stays open
  // across exec and closes when it exits; the parent closes its own right
  // after fork.
  int exec_status[2] = {-1, -1};
  int exit_pipe[2] = {-1, -1};
  int log = -1;
  // Closes what was opened so far and says which step failed.
  auto fail = [&](const std::string& what) {
    const int error = errno;
    for (int fd : {exec_status[0], exec_status[1], exit_pipe[0], exit_pipe[1],
                   log, output_fd_}) {
      if (fd >= 0) close(fd);
    }
    output_fd_ = -1;
    return absl::InternalError(absl::StrCat(what, ": ", std::strerror(error)));
  };
  if (pipe2(exec_status, O_CLOEXEC) != 0) return fail("pipe");
  if (log_path_.empty()) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return fail("pipe");
    output_fd_ = fds[0];
    log = fds[1];
  } else {
    log =
        open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log < 0) return fail("cannot open " + log_path_);
  }
  if (watch_exit_ && pipe2(exit_pipe, O_CLOEXEC) != 0) return fail("pipe");
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) return fail("fork");
  if (child == 0) {
    // Only async-signal-safe calls from here on: the parent may have
    // other threads, whose locks the child inherits held.
    if (parent_death_signal_ != 0) {
      prctl(PR_SET_PDEATHSIG, parent_death_signal_);
      // The parent may have died before prctl: then nobody sends the
      // signal (the child already belongs to another process).
      if (getppid() != parent) _exit(128 + parent_death_signal_);
    }
    if (own_process_group_) setpgid(0, 0);
    dup2(log, STDOUT_FILENO);
    dup2(log, STDERR_FILENO);
    if (exit_pipe[1] >= 0) fcntl(exit_pipe[1], F_SETFD, 0);  // kept across exec
    ResetSignalsForExec();
    execve(argv[0], argv.data(), envp.data());
    const int error = errno;
    [[maybe_unused]] ssize_t written =
        write(exec_status[1], &error, sizeof(error));
    _exit(127);
  }
  pid_ = child;
  close(log);
  if (exit_pipe[1] >= 0) {
    close(exit_pipe[1]);
    exit_fd_ = exit_pipe[0];
  }
  close(exec_status[1]);
  int exec_error = 0;
  ssize_t n;
  do {
    n = read(exec_status[0], &exec_error, sizeof(exec_error));
  } while (n < 0 && errno == EINTR);
  close(exec_status[0]);
  if (n == static_cast<ssize_t>(sizeof(exec_error))) {
    // The child has exited (or is about to): reap it, so that nothing of
    // this start is left.
    int status;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    exited_ = true;
    exit_code_ = 127;
    if (output_fd_ >= 0) close(output_fd_);
    output_fd_ = -1;
    if (exit_fd_ >= 0) close(exit_fd_);
    exit_fd_ = -1;
    // NOT_FOUND, PERMISSION_DENIED, ...; a file that is no program
    // (ENOEXEC) is not an UNKNOWN error.
    absl::StatusCode code = absl::ErrnoToStatusCode(exec_error);
    if (code == absl::StatusCode::kUnknown) {
      code = absl::StatusCode::kFailedPrecondition;
    }
    return absl::Status(code, absl::StrCat("cannot run ", argv_[0], ": ",
                                           std::strerror(exec_error)));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> Subprocess::Wait(absl::Duration timeout) {
  if (exited_) return exit_code_;
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      exit_code_ =
          WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return exit_code_;
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(argv_[0], " still running after ",
                       absl::FormatDuration(timeout), "; output:\n", Output()));
    }
    RealClock().SleepFor(absl::Milliseconds(10));
  }
}

bool Subprocess::Exited() {
  if (exited_) return true;
  int status = 0;
  if (pid_ > 0 && waitpid(pid_, &status, WNOHANG) == pid_) {
    exited_ = true;
    exit_code_ =
        WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return exited_;
}

void Subprocess::Signal(int signal) {
  if (pid_ > 0 && !exited_) kill(pid_, signal);
}

std::string Subprocess::Output() const {
  if (log_path_.empty()) return "";
  std::ifstream in(log_path_);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

absl::StatusOr<int> WaitForPortFile(const std::string& path,
                                    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    std::ifstream in(path);
    std::string text;
    if (in && std::getline(in, text)) {
      int port = 0;
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &port) &&
          port > 0) {
        return port;
      }
    }
    RealClock().SleepFor(absl::Milliseconds(10));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "no port in ", path, " after ", absl::FormatDuration(timeout)));
}

}  // namespace psflow
