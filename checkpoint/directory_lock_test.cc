#include "checkpoint/directory_lock.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string Dir(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/lock_", name);
}

TEST(DirectoryLockTest, ASecondHolderIsRefusedNamingTheFirst) {
  const std::string dir = Dir("second");
  ASSERT_OK_AND_ASSIGN(auto first, DirectoryLock::Acquire(dir, "job a"));
  EXPECT_EQ(first->previous_holder(), "");
  EXPECT_THAT(DirectoryLock::Acquire(dir, "job b"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("in use by another job (job a, pid " +
                                       std::to_string(getpid())),
                             HasSubstr("checkpoint.directory"))));
  first.reset();
  // Released cleanly: the next holder sees no crash.
  ASSERT_OK_AND_ASSIGN(auto again, DirectoryLock::Acquire(dir, "job b"));
  EXPECT_EQ(again->previous_holder(), "");
}

// A holder that dies (SIGKILL: no destructor) leaves its text but not its
// lock: the next job takes over at once and learns whose it was.
TEST(DirectoryLockTest, ADeadHoldersLockIsTakenOverAndReported) {
  const std::string dir = Dir("dead");
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ready[0]);
    auto lock = DirectoryLock::Acquire(dir, "job crashed");
    const char byte = lock.ok() ? 1 : 0;
    (void)!write(ready[1], &byte, 1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  ASSERT_EQ(byte, 1);
  EXPECT_EQ(DirectoryLock::Acquire(dir, "job new").status().code(),
            absl::StatusCode::kFailedPrecondition);
  kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_OK_AND_ASSIGN(auto lock, DirectoryLock::Acquire(dir, "job new"));
  EXPECT_THAT(lock->previous_holder(),
              HasSubstr("job crashed, pid " + std::to_string(child)));
}

TEST(DirectoryLockTest, ALockPathThatIsNotAFileIsRefused) {
  const std::string dir = Dir("notafile");
  ASSERT_OK(MakeDirectories(dir + "/LOCK"));
  EXPECT_EQ(DirectoryLock::Acquire(dir, "job").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace psflow
