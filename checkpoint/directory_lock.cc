#include "checkpoint/directory_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/file_util.h"

namespace psflow {
namespace {

// The holder's line; a lock file is never larger than this.
constexpr size_t kMaxHolderBytes = 1024;

std::string ReadHolder(int fd) {
  char buffer[kMaxHolderBytes];
  const ssize_t n = pread(fd, buffer, sizeof(buffer), 0);
  if (n <= 0) return "";
  return std::string(absl::StripAsciiWhitespace(
      absl::string_view(buffer, static_cast<size_t>(n))));
}

std::string HostName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "unknown host";
  return host;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DirectoryLock>> DirectoryLock::Acquire(
    const std::string& dir, const std::string& holder) {
  if (absl::Status made = MakeDirectories(dir); !made.ok()) return made;
  const std::string path = absl::StrCat(dir, "/", kLockFileName);
  const int fd =
      open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open the checkpoint directory's lock ", path, ": ",
                     std::strerror(errno)));
  }
  struct stat info;
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not a regular file; remove it"));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string other = ReadHolder(fd);
    close(fd);
    if (error == EWOULDBLOCK) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the checkpoint directory ", dir, " is in use by another job (",
          other.empty() ? "holder unknown" : other,
          "); two jobs cannot share one: give this job its own "
          "checkpoint.directory (or --checkpoint_dir), or stop the other"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("cannot lock ", path, ": ", std::strerror(error)));
  }
  std::unique_ptr<DirectoryLock> lock(new DirectoryLock(path, fd));
  // Text left by a holder that did not release cleanly (a crash).
  lock->previous_holder_ = ReadHolder(fd);
  const std::string text =
      absl::StrCat(holder, ", pid ", getpid(), " on ", HostName(), " since ",
                   absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::Now(),
                                    absl::UTCTimeZone()),
                   "\n");
  if (ftruncate(fd, 0) != 0 || pwrite(fd, text.data(), text.size(), 0) !=
                                   static_cast<ssize_t>(text.size())) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  return lock;
}

DirectoryLock::~DirectoryLock() {
  // Emptied first, so a later holder does not take a clean release for a
  // crash; then the kernel's lock goes with the descriptor.
  (void)ftruncate(fd_, 0);
  close(fd_);
}

}  // namespace psflow
