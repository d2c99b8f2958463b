#include "common/shared_memory_region.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace psflow {
namespace {

constexpr char kMagic[] = "psflow shared memory v1";  // 24 bytes with NUL
constexpr int kTokenOffset = 32;
constexpr char kNamePrefix[] = "psflow-";

std::string ErrnoText() { return std::strerror(errno); }

absl::StatusOr<std::string> RandomToken() {
  char bytes[16];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::InternalError(absl::StrCat("getrandom: ", ErrnoText()));
    }
    got += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(absl::string_view(bytes, sizeof(bytes)));
}

absl::StatusOr<char*> Map(int fd, int64_t bytes) {
  void* base = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE,
                    MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot map ", bytes, " bytes of shared memory: ", ErrnoText()));
  }
  return static_cast<char*>(base);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> SharedMemoryRegion::Create(
    int64_t data_bytes) {
  if (data_bytes <= 0 || data_bytes % kSharedMemoryAlignment != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared memory of ", data_bytes, " bytes: use a positive multiple of ",
        kSharedMemoryAlignment));
  }
  absl::StatusOr<std::string> token = RandomToken();
  if (!token.ok()) return token.status();
  const std::string name = absl::StrCat(kNamePrefix, *token);
  const int fd = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("memfd_create: ", ErrnoText()));
  }
  const int64_t total = kSharedMemoryHeaderBytes + data_bytes;
  // Owner-only, on top of /proc/<pid>/fd being reachable only by this
  // process's user: no other user's process may open the region.
  if (fchmod(fd, 0600) != 0 || ftruncate(fd, total) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const std::string error = ErrnoText();
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot size and seal shared memory: ", error));
  }
  absl::StatusOr<char*> base = Map(fd, total);
  if (!base.ok()) {
    close(fd);
    return base.status();
  }
  std::memcpy(*base, kMagic, sizeof(kMagic));
  std::memcpy(*base + kTokenOffset, token->data(), token->size());
  return std::unique_ptr<SharedMemoryRegion>(
      new SharedMemoryRegion(fd, *base, total, *std::move(token)));
}

absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> SharedMemoryRegion::Open(
    pid_t pid, int fd, int64_t total_bytes, const std::string& token) {
  if (pid <= 0 || fd < 0 || token.size() != 32 ||
      total_bytes <= kSharedMemoryHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad shared memory reference (pid ", pid, ", fd ", fd,
                     ", ", total_bytes, " bytes)"));
  }
  const std::string path = absl::StrCat("/proc/", pid, "/fd/", fd);
  // Check the link before opening: on another host (or in another pid
  // namespace) the path names some unrelated file, which must not be opened.
  char target[PATH_MAX];
  const ssize_t length = readlink(path.c_str(), target, sizeof(target) - 1);
  if (length < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot read ", path, " (", ErrnoText(),
        "): the client runs on another host, in another pid namespace, or "
        "as another user"));
  }
  const std::string expected =
      absl::StrCat("/memfd:", kNamePrefix, token, " (deleted)");
  if (absl::string_view(target, static_cast<size_t>(length)) != expected) {
    return absl::FailedPreconditionError(
        absl::StrCat(path,
                     " is not the client's shared memory: the client "
                     "runs on another host or in another pid namespace"));
  }
  // The client could swap the descriptor after the readlink: pin the file
  // with O_PATH (which opens nothing) and check it is a plain shmem file
  // (not hugetlbfs, whose faults can SIGBUS) before really opening it.
  const int pinned = open(path.c_str(), O_PATH | O_CLOEXEC);
  if (pinned < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open ", path, ": ", ErrnoText()));
  }
  struct stat info;
  struct statfs filesystem;
  if (fstat(pinned, &info) == 0 && info.st_uid != geteuid()) {
    // Only between processes of one user: a server running as root must
    // not map (and write into) another user's memory.
    const uid_t owner = info.st_uid;
    close(pinned);
    return absl::PermissionDeniedError(
        absl::StrCat(path, " belongs to uid ", owner,
                     ", not to this server's uid ", geteuid(),
                     ": shared memory is used only between processes of the "
                     "same user"));
  }
  const bool shmem_file = fstat(pinned, &info) == 0 && S_ISREG(info.st_mode) &&
                          fstatfs(pinned, &filesystem) == 0 &&
                          filesystem.f_type == TMPFS_MAGIC;
  const int opened = shmem_file
                         ? open(absl::StrCat("/proc/self/fd/", pinned).c_str(),
                                O_RDWR | O_CLOEXEC)
                         : -1;
  close(pinned);
  if (opened < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " is not the client's shared memory (not a plain shmem file)"));
  }
  auto fail = [opened](std::string message) {
    close(opened);
    return absl::FailedPreconditionError(std::move(message));
  };
  // Seals first, then the size: a file sealed against shrinking keeps at
  // least the size read after it, while one checked the other way round
  // could shrink in between and fault the server (SIGBUS) on first use.
  const int seals = fcntl(opened, F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    return fail(absl::StrCat(path, " is not sealed against shrinking"));
  }
  if (fstat(opened, &info) != 0 || !S_ISREG(info.st_mode) ||
      info.st_size != total_bytes) {
    return fail(
        absl::StrCat(path, " is not a region of ", total_bytes, " bytes"));
  }
  absl::StatusOr<char*> base = Map(opened, total_bytes);
  if (!base.ok()) return fail(std::string(base.status().message()));
  if (std::memcmp(*base, kMagic, sizeof(kMagic)) != 0 ||
      std::memcmp(*base + kTokenOffset, token.data(), token.size()) != 0) {
    munmap(*base, static_cast<size_t>(total_bytes));
    return fail(absl::StrCat(path, " does not hold the client's token"));
  }
  return std::unique_ptr<SharedMemoryRegion>(
      new SharedMemoryRegion(opened, *base, total_bytes, token));
}

SharedMemoryRegion::~SharedMemoryRegion() {
  munmap(base_, static_cast<size_t>(total_bytes_));
  close(fd_);
}

}  // namespace psflow
