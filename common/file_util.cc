#include "common/file_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace psflow {
namespace {

std::string Errno() { return std::strerror(errno); }

absl::Status IoError(absl::string_view what, const std::string& path) {
  const int error = errno;
  std::string message =
      absl::StrCat("cannot ", what, " ", path, ": ", std::strerror(error));
  if (error == ENOENT) return absl::NotFoundError(message);
  if (error == EEXIST) return absl::AlreadyExistsError(message);
  if (error == ENOSPC || error == EDQUOT) {
    return absl::ResourceExhaustedError(message);
  }
  if (error == EACCES || error == EPERM || error == EROFS) {
    return absl::PermissionDeniedError(message);
  }
  return absl::InternalError(message);
}

}  // namespace

void FileDescriptor::Reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

absl::Status MakeDirectories(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i != path.size() && path[i] != '/') continue;
    const std::string partial = path.substr(0, i);
    if (mkdir(partial.c_str(), 0755) == 0) continue;
    if (errno != EEXIST) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot create directory ", partial, ": ", Errno()));
    }
    // It exists as a name: it must lead to a directory. A dangling link
    // or a file would fail the next step under a name that hides why.
    struct stat st;
    if (stat(partial.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;
    char target[4096];
    const ssize_t length =
        readlink(partial.c_str(), target, sizeof(target) - 1);
    if (length > 0) {
      target[length] = '\0';
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot create directory ", path, ": ", partial,
          " is a symbolic link to ", target,
          ", which is not a directory (it does not exist, or is a file)"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create directory ", path, ": ", partial,
                     " exists and is not a directory"));
  }
  return absl::OkStatus();
}

absl::StatusOr<WritableFile> WritableFile::CreateNew(const std::string& path) {
  const int fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("create", path);
  return WritableFile(path, fd);
}

absl::Status WritableFile::Append(absl::string_view data) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    const ssize_t n = write(fd_.get(), p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError("write", path_);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  size_ += static_cast<int64_t>(data.size());
  return absl::OkStatus();
}

absl::Status WritableFile::Sync() {
  if (fdatasync(fd_.get()) != 0) return IoError("fsync", path_);
  return absl::OkStatus();
}

absl::Status WritableFile::Close() {
  const int fd = fd_.Release();
  if (fd >= 0 && close(fd) != 0) return IoError("close", path_);
  return absl::OkStatus();
}

absl::StatusOr<int> OpenRegularFile(const std::string& path) {
  // O_NONBLOCK: opening a FIFO without a writer would otherwise wait for
  // one forever. It is cleared again for the reads of a regular file.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return IoError("open", path);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    absl::Status status = IoError("stat", path);
    close(fd);
    return status;
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not a regular file (",
                     S_ISDIR(st.st_mode)    ? "a directory"
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "a device",
                     "); name a file"));
  }
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    absl::Status status = IoError("configure", path);
    close(fd);
    return status;
  }
  return fd;
}

absl::StatusOr<RandomAccessFile> RandomAccessFile::Open(
    const std::string& path) {
  absl::StatusOr<int> fd = OpenRegularFile(path);
  if (!fd.ok()) return fd.status();
  struct stat st;
  if (fstat(*fd, &st) != 0) {
    absl::Status status = IoError("stat", path);
    close(*fd);
    return status;
  }
  return RandomAccessFile(path, *fd, static_cast<int64_t>(st.st_size));
}

void RandomAccessFile::WillReadSequentially() const {
  (void)posix_fadvise(fd_.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  (void)posix_fadvise(fd_.get(), 0, 0, POSIX_FADV_WILLNEED);
}

absl::Status RandomAccessFile::Read(int64_t offset, int64_t n,
                                    char* out) const {
  int64_t done = 0;
  while (done < n) {
    const ssize_t got =
        pread(fd_.get(), out + done, static_cast<size_t>(n - done),
              static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return IoError("read", path_);
    }
    if (got == 0) {
      return absl::DataLossError(
          absl::StrCat(path_, " ends at byte ", offset + done, " but ", n,
                       " bytes were expected at offset ", offset,
                       " (the file is truncated)"));
    }
    done += got;
  }
  return absl::OkStatus();
}

absl::Status CheckReplaceableFile(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return IoError("stat", path);
  }
  if (S_ISREG(st.st_mode)) return absl::OkStatus();
  // The rename that replaces the file would replace a link rather than
  // follow it, and a device or FIFO with a regular file: a clear error
  // instead of a surprise.
  const char* what = S_ISLNK(st.st_mode)    ? "a symbolic link"
                     : S_ISDIR(st.st_mode)  ? "a directory"
                     : S_ISCHR(st.st_mode)  ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "not a regular file";
  return absl::FailedPreconditionError(absl::StrCat(
      "refusing to write ", path, ": it is ", what,
      ", which writing a new file there would replace; name a regular "
      "file (or a path that does not exist yet)"));
}

absl::Status WriteFileWithMode(const std::string& path, absl::string_view data,
                               unsigned mode) {
  // A link at `path` would otherwise redirect a key or token (and the
  // chmod) to whatever it points at. The rename below replaces a link
  // rather than following it, so one planted after this check is
  // harmless too; the check is for a clear error instead of a surprise.
  RETURN_IF_ERROR(CheckReplaceableFile(path));
  // A new file beside the target, renamed over it once complete: a crash
  // leaves the old content or the new, never an empty or partial secret.
  std::random_device random;
  const std::string temp = absl::StrCat(path, ".tmp-", random());
  const int fd = open(
      temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return IoError("create", temp);
  // fchmod: the umask may have narrowed `mode`; it is created no wider.
  absl::Status status =
      fchmod(fd, mode) == 0 ? absl::OkStatus() : IoError("chmod", temp);
  size_t written = 0;
  while (status.ok() && written < data.size()) {
    const ssize_t n = write(fd, data.data() + written, data.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      status = n < 0 ? IoError("write", temp)
                     : absl::InternalError(absl::StrCat("cannot write ", temp,
                                                        ": no progress"));
      break;
    }
    written += static_cast<size_t>(n);
  }
  if (status.ok() && fsync(fd) != 0) status = IoError("fsync", temp);
  if (close(fd) != 0 && status.ok()) status = IoError("close", temp);
  if (status.ok()) status = RenamePath(temp, path);
  if (!status.ok()) {
    unlink(temp.c_str());
    return status;
  }
  return SyncDirectory(DirName(path));
}

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view data) {
  RETURN_IF_ERROR(CheckReplaceableFile(path));
  std::random_device random;
  const std::string temp = absl::StrCat(path, ".tmp-", random());
  {
    absl::StatusOr<WritableFile> file = WritableFile::CreateNew(temp);
    if (!file.ok()) return file.status();
    absl::Status status = file->Append(data);
    if (status.ok()) status = file->Sync();
    if (status.ok()) status = file->Close();
    if (!status.ok()) {
      unlink(temp.c_str());
      return status;
    }
  }
  if (absl::Status renamed = RenamePath(temp, path); !renamed.ok()) {
    unlink(temp.c_str());
    return renamed;
  }
  return SyncDirectory(DirName(path));
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path,
                                             int64_t max_bytes) {
  absl::StatusOr<RandomAccessFile> file = RandomAccessFile::Open(path);
  if (!file.ok()) return file.status();
  if (file->size() > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is ", file->size(), " bytes; at most ", max_bytes,
                     " are read from such a file"));
  }
  std::string data(static_cast<size_t>(file->size()), '\0');
  absl::Status status = file->Read(0, file->size(), data.data());
  if (!status.ok()) return status;
  return data;
}

absl::Status SyncDirectory(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return IoError("open directory", path);
  const int rc = fsync(fd);
  absl::Status status = rc == 0 ? absl::OkStatus() : IoError("fsync", path);
  close(fd);
  return status;
}

absl::Status RenamePath(const std::string& from, const std::string& to) {
  if (rename(from.c_str(), to.c_str()) != 0) {
    return IoError("rename", absl::StrCat(from, " to ", to));
  }
  return absl::OkStatus();
}

absl::Status RemoveRecursively(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return IoError("stat", path);
  }
  if (S_ISDIR(st.st_mode)) {
    absl::StatusOr<std::vector<std::string>> entries = ListDirectory(path);
    if (!entries.ok()) return entries.status();
    for (const std::string& entry : *entries) {
      absl::Status status = RemoveRecursively(absl::StrCat(path, "/", entry));
      if (!status.ok()) return status;
    }
    if (rmdir(path.c_str()) != 0) return IoError("remove", path);
  } else if (unlink(path.c_str()) != 0) {
    return IoError("remove", path);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ListDirectory(
    const std::string& path) {
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return IoError("list", path);
  std::vector<std::string> names;
  while (struct dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

bool PathExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

absl::StatusOr<int64_t> FileSize(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return IoError("stat", path);
  return static_cast<int64_t>(st.st_size);
}

std::string AbsolutePath(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char buffer[4096];
  if (getcwd(buffer, sizeof(buffer)) == nullptr) return path;
  if (path.empty() || path == ".") return buffer;
  return absl::StrCat(buffer, "/", path);
}

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace psflow
