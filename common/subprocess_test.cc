#include "common/subprocess.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// Polls (without blocking) for `pid`, a child of this process, to end;
// returns its wait status, or -1 when it still runs at `deadline`.
int WaitForExit(pid_t pid, absl::Time deadline) {
  while (true) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return -1;
    if (absl::Now() > deadline) return -1;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

TEST(SubprocessTest, RunsAProgramAndReportsItsExitCode) {
  Subprocess process({"/bin/sh", "-c", "echo hello; exit 3"}, {}, "");
  ASSERT_OK(process.Start());
  std::string output;
  char buffer[256];
  ssize_t n;
  while ((n = read(process.output_fd(), buffer, sizeof(buffer))) > 0) {
    output.append(buffer, n);
  }
  EXPECT_EQ(output, "hello\n");
  EXPECT_THAT(process.Wait(absl::Seconds(30)), IsOkAndHolds(3));
}

// A log-file child watched through exit_fd(): the descriptor stays
// silent while the child runs and reads end of file once it exited, with
// no call to Wait or Exited.
TEST(SubprocessTest, TheExitDescriptorClosesWhenTheChildExits) {
  const std::string log = absl::StrCat(TempDir(), "/watched-", getpid());
  Subprocess process({"/bin/sh", "-c", "echo started; exec sleep 1000"}, {},
                     log);
  process.set_watch_exit(true);
  ASSERT_OK(process.Start());
  ASSERT_GE(process.exit_fd(), 0);
  pollfd watch = {process.exit_fd(), POLLIN, 0};
  EXPECT_EQ(poll(&watch, 1, 200), 0) << "readable while the child runs";
  process.Signal(SIGTERM);
  ASSERT_EQ(poll(&watch, 1, 30000), 1) << "still open after the child's end";
  char byte;
  EXPECT_EQ(read(process.exit_fd(), &byte, 1), 0);
  EXPECT_THAT(process.Wait(absl::Seconds(30)), IsOkAndHolds(128 + SIGTERM));
  EXPECT_EQ(process.Output(), "started\n");

  Subprocess unwatched({"/bin/true"}, {}, log);
  ASSERT_OK(unwatched.Start());
  EXPECT_EQ(unwatched.exit_fd(), -1);
  EXPECT_THAT(unwatched.Wait(absl::Seconds(30)), IsOkAndHolds(0));
}

TEST(SubprocessTest, StartFailsForAProgramThatCannotRun) {
  // Executable, but neither a binary nor a script: execve says ENOEXEC.
  const std::string not_a_program =
      absl::StrCat(TempDir(), "/not_a_program-", getpid());
  std::ofstream(not_a_program) << "this is not a program\n";
  ASSERT_EQ(chmod(not_a_program.c_str(), 0755), 0);
  Subprocess process({not_a_program}, {}, "");
  EXPECT_THAT(process.Start(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("cannot run " + not_a_program),
                             HasSubstr("Exec format error"))));
  // Nothing is left: the child that could not run was reaped.
  EXPECT_TRUE(process.Exited());
  EXPECT_EQ(process.output_fd(), -1);
  int status;
  EXPECT_EQ(waitpid(-1, &status, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);

  Subprocess missing({TempDir() + "/no_such_program"}, {}, "");
  EXPECT_THAT(missing.Start(),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("No such file or directory")));
}

// The launcher's parent is killed with SIGKILL, so it cannot stop its
// child itself: with a parent death signal, the child goes too.
TEST(SubprocessTest, ParentDeathSignalStopsTheChildOfAKilledParent) {
  // Orphans of our children become ours, so that this test can see the
  // grandchild's end (and reap it) once its parent is gone.
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  int pid_pipe[2];
  ASSERT_EQ(pipe(pid_pipe), 0);
  const pid_t parent = fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    // The launcher: starts a long-running child, says which, and waits
    // to be killed. (This test's process has no other threads.)
    close(pid_pipe[0]);
    Subprocess child({"/bin/sleep", "1000"}, {}, "");
    child.set_own_process_group(true);
    child.set_parent_death_signal(SIGTERM);
    if (!child.Start().ok()) _exit(2);
    const pid_t pid = child.pid();
    if (write(pid_pipe[1], &pid, sizeof(pid)) != sizeof(pid)) _exit(3);
    while (true) pause();
  }
  close(pid_pipe[1]);
  pid_t grandchild = -1;
  const ssize_t n = read(pid_pipe[0], &grandchild, sizeof(grandchild));
  close(pid_pipe[0]);
  ASSERT_EQ(n, static_cast<ssize_t>(sizeof(grandchild)));

  ASSERT_EQ(kill(parent, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(parent, &status, 0), parent);
  ASSERT_TRUE(WIFSIGNALED(status));

  // A bound, not an expected time: the signal comes as the parent exits.
  status = WaitForExit(grandchild, absl::Now() + absl::Seconds(30));
  if (status == -1) {
    kill(grandchild, SIGKILL);
    waitpid(grandchild, &status, 0);
    ADD_FAILURE() << "the child outlived its killed parent by 30 s";
  } else {
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM)
        << "wait status " << status;
  }
  prctl(PR_SET_CHILD_SUBREAPER, 0);
}

int handler_pipe = -1;
void WriteToHandlerPipe(int) {
  const char byte = 'h';
  [[maybe_unused]] ssize_t n = write(handler_pipe, &byte, 1);
}

// fff0a32: a signal pending in a forked child when its mask is undone
// takes its default action there (here: ends it), not the parent's
// handler; ignored signals stay ignored.
TEST(SubprocessTest, AForkedChildHandlesNoSignalWithItsParentsHandler) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(pipe_fds[0]);
    handler_pipe = pipe_fds[1];
    struct sigaction handled = {};
    handled.sa_handler = WriteToHandlerPipe;
    sigaction(SIGUSR1, &handled, nullptr);
    struct sigaction ignored = {};
    ignored.sa_handler = SIG_IGN;
    sigaction(SIGUSR2, &ignored, nullptr);
    sigset_t blocked;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGUSR1);
    sigprocmask(SIG_BLOCK, &blocked, nullptr);
    raise(SIGUSR1);  // pending until ResetSignalsForExec unblocks it
    ResetSignalsForExec();
    struct sigaction now;
    sigaction(SIGUSR2, nullptr, &now);
    _exit(now.sa_handler == SIG_IGN ? 0 : 1);
  }
  close(pipe_fds[1]);
  int status = WaitForExit(child, absl::Now() + absl::Seconds(30));
  if (status == -1) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    FAIL() << "the child did not end";
  }
  char byte;
  const ssize_t handled = read(pipe_fds[0], &byte, 1);
  close(pipe_fds[0]);
  EXPECT_EQ(handled, 0) << "the parent's handler ran in the child";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGUSR1)
      << "wait status " << status;

  // And with the signal not pending: the ignored one stays ignored.
  const pid_t second = fork();
  ASSERT_GE(second, 0);
  if (second == 0) {
    struct sigaction ignored = {};
    ignored.sa_handler = SIG_IGN;
    sigaction(SIGUSR2, &ignored, nullptr);
    struct sigaction handled = {};
    handled.sa_handler = WriteToHandlerPipe;
    sigaction(SIGUSR1, &handled, nullptr);
    ResetSignalsForExec();
    struct sigaction usr1, usr2;
    sigaction(SIGUSR1, nullptr, &usr1);
    sigaction(SIGUSR2, nullptr, &usr2);
    _exit(usr1.sa_handler == SIG_DFL && usr2.sa_handler == SIG_IGN ? 0 : 1);
  }
  status = WaitForExit(second, absl::Now() + absl::Seconds(30));
  ASSERT_NE(status, -1);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "wait status " << status;
}

}  // namespace
}  // namespace psflow
