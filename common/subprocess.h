// Starts real processes for multi-process tests and cleans them up.
//
//   Subprocess ps({PsServerPath(), "--port_file=" + file}, {{"TF_CONFIG",
//   json}}); ASSERT_OK(ps.Start());
//   ... ASSERT_OK_AND_ASSIGN(int port, WaitForPortFile(file,
//   absl::Seconds(20))); EXPECT_THAT(ps.Wait(absl::Seconds(10)),
//   IsOkAndHolds(0));
//
// Output (stdout and stderr) goes to a log file that tests can read and
// that is printed when a test fails to find what it waited for. The
// destructor kills a process that is still running. Not thread-safe.
//
// Start() fails, leaving no process behind, when the program cannot be
// run at all (missing, not executable, not a program): it says why rather
// than leaving a process that exits 127.
#ifndef PSFLOW_COMMON_SUBPROCESS_H_
#define PSFLOW_COMMON_SUBPROCESS_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace psflow {

// For a child between fork and exec (async-signal-safe): every signal the
// parent catches goes back to its default action, then the signal mask is
// cleared. Otherwise a signal that reaches the child before exec (a
// terminal's Ctrl-C to the group, a parent-death signal) and is pending
// until the mask is undone runs the parent's handler in the child, which
// writes into the parent's signal pipe instead of stopping the child.
void ResetSignalsForExec();

class Subprocess {
 public:
  // `env` is added to (and overrides) this process's environment. The
  // child's stdout and stderr go to `log_path`, or, when it is empty, to a
  // pipe the caller reads from output_fd().
  Subprocess(std::vector<std::string> argv,
             std::map<std::string, std::string> env, std::string log_path);
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess();

  // Before Start: the child leads a process group of its own, so a
  // terminal's Ctrl-C (sent to the foreground group) reaches only this
  // process, which then decides how and in which order to stop children.
  void set_own_process_group(bool own) { own_process_group_ = own; }

  // Before Start: the child receives `signal` (e.g. SIGTERM) when its
  // parent goes, however it goes, SIGKILL included, so it never outlives
  // a launcher that could not stop it (with its own process group, nobody
  // else would). A child whose parent died before it could ask for this
  // exits at once, without running argv.
  //
  // Linux ties the signal to the parent *thread*: the child gets it when
  // the thread that called Start() ends, even if the process lives on.
  // Start the child from a thread that outlives it (the one that waits
  // for it and reaps it); never from a short-lived helper thread. 0 (the
  // default): the child outlives its parent, as before; a test's children
  // that stay in its process group go when Bazel stops that group.
  void set_parent_death_signal(int signal) { parent_death_signal_ = signal; }

  // Before Start: exit_fd() is made, a descriptor that reads end of file
  // (poll: POLLHUP) once the child has exited, and with it every process
  // it passed the descriptor on to. For a thread that follows the child's
  // log file while another thread waits for and reaps the child (this
  // class is not thread-safe, so that thread may not call Exited()).
  void set_watch_exit(bool watch) { watch_exit_ = watch; }

  absl::Status Start();

  // Waits for exit; returns the exit code, or 128 + signal when killed.
  // DeadlineExceeded when it is still running after `timeout`.
  absl::StatusOr<int> Wait(absl::Duration timeout);
  // Whether it has exited, without waiting (reaps it when it has).
  bool Exited();

  // Sends `signal` (if still running).
  void Signal(int signal);

  // Everything the process wrote so far.
  std::string Output() const;

  pid_t pid() const { return pid_; }

  // Read end of the output pipe (pipe mode only; -1 otherwise). The caller
  // reads it until end of file; the destructor closes it.
  int output_fd() const { return output_fd_; }

  // With set_watch_exit(true): see there; -1 otherwise. The destructor
  // closes it.
  int exit_fd() const { return exit_fd_; }

 private:
  std::vector<std::string> argv_;
  std::map<std::string, std::string> env_;
  std::string log_path_;
  bool own_process_group_ = false;
  int parent_death_signal_ = 0;
  pid_t pid_ = -1;
  int output_fd_ = -1;
  bool watch_exit_ = false;
  int exit_fd_ = -1;
  bool exited_ = false;
  int exit_code_ = 0;
};

// Polls `path` until it holds a port number (see common/port_file.h).
absl::StatusOr<int> WaitForPortFile(const std::string& path,
                                    absl::Duration timeout);

}  // namespace psflow

#endif  // PSFLOW_COMMON_SUBPROCESS_H_
