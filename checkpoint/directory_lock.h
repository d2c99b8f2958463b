// One job per checkpoint directory: the chief holds an exclusive lock on
// <dir>/LOCK for the job's life, so a second job pointed at the same
// directory fails at start, naming the first, instead of interleaving
// checkpoints and deleting the other's.
//
// The lock is flock(2) on the file: the kernel drops it when its holder
// dies, however it dies, so a crashed chief never leaves a lock that
// blocks its restart; the file's text (who held it) then says whose it
// was, and the new holder logs that it took over. On network file systems
// flock works across hosts where the server supports it (NFSv4 locks).
//
// Thread-compatible; the lock is released when the object goes.
#ifndef PSFLOW_CHECKPOINT_DIRECTORY_LOCK_H_
#define PSFLOW_CHECKPOINT_DIRECTORY_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace psflow {

inline constexpr char kLockFileName[] = "LOCK";

class DirectoryLock {
 public:
  // Locks `dir` (created if missing) for `holder` (e.g. "job mnist, chief-0";
  // the pid, host and time are added). FailedPrecondition naming the
  // current holder when another process has it.
  static absl::StatusOr<std::unique_ptr<DirectoryLock>> Acquire(
      const std::string& dir, const std::string& holder);

  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

  // Who held the lock before, when its holder died without releasing it
  // cleanly ("" when the lock was free and clean).
  const std::string& previous_holder() const { return previous_holder_; }

 private:
  DirectoryLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

  std::string path_;
  int fd_;
  std::string previous_holder_;
};

}  // namespace psflow

#endif  // PSFLOW_CHECKPOINT_DIRECTORY_LOCK_H_
