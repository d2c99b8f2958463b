// Small filesystem helpers: directories, durable writes, positioned reads.
// Errors name the path and the system's reason.
#ifndef PSFLOW_COMMON_FILE_UTIL_H_
#define PSFLOW_COMMON_FILE_UTIL_H_

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow {

// `mkdir -p`: creates `path` and its missing parents.
absl::Status MakeDirectories(const std::string& path);

// An open file descriptor, closed when it goes; movable, not copyable.
class FileDescriptor {
 public:
  FileDescriptor() = default;
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(FileDescriptor&& other) noexcept
      : fd_(std::exchange(other.fd_, -1)) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept {
    if (this != &other) Reset(std::exchange(other.fd_, -1));
    return *this;
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() { Reset(-1); }

  int get() const { return fd_; }
  // Gives up ownership without closing.
  int Release() { return std::exchange(fd_, -1); }

 private:
  void Reset(int fd);
  int fd_ = -1;
};

// A file being written, for data that must survive a crash once Sync()
// returned. Closed (not synced) by the destructor.
class WritableFile {
 public:
  // Creates `path`; AlreadyExists if it exists (never overwrites).
  static absl::StatusOr<WritableFile> CreateNew(const std::string& path);

  WritableFile(WritableFile&& other) = default;
  WritableFile& operator=(WritableFile&& other) = default;

  absl::Status Append(absl::string_view data);
  // fdatasync: the data (and the metadata needed to read it) is on disk.
  absl::Status Sync();
  absl::Status Close();

  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  WritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  FileDescriptor fd_;
  int64_t size_ = 0;
};

// Opens `path` for reading only if it is a regular file: a FIFO, device,
// socket or directory is FailedPrecondition naming it (opened without
// blocking, so a FIFO with no writer cannot hang the caller). Returns the
// descriptor, which the caller closes. NotFound when it does not exist.
absl::StatusOr<int> OpenRegularFile(const std::string& path);

// A file read at arbitrary offsets (pread), from any number of threads.
class RandomAccessFile {
 public:
  // NotFound when `path` does not exist; FailedPrecondition when it is not
  // a regular file (OpenRegularFile).
  static absl::StatusOr<RandomAccessFile> Open(const std::string& path);

  RandomAccessFile(RandomAccessFile&& other) = default;
  RandomAccessFile& operator=(RandomAccessFile&& other) = default;

  // Reads exactly `n` bytes at `offset` into `out`; DataLoss when the file
  // ends first (a truncated file).
  absl::Status Read(int64_t offset, int64_t n, char* out) const;

  // Tells the kernel the whole file will be read soon, front to back, so
  // it reads ahead (asynchronously) while the caller works. A hint only.
  void WillReadSequentially() const;

  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  RandomAccessFile(std::string path, int fd, int64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  std::string path_;
  FileDescriptor fd_;
  int64_t size_ = 0;
};

// OK when `path` does not exist or is a regular file that a new file may
// be renamed over; FailedPrecondition, naming what is there, otherwise: a
// symbolic link, a directory, a device (/dev/null), a FIFO or a socket,
// which the rename would replace (as root even /dev/null).
absl::Status CheckReplaceableFile(const std::string& path);

// Writes `data` to `path` durably and atomically: a temporary file beside
// it, fsynced, renamed over `path`, then the directory fsynced. Readers
// see the old or the new content, never a mix, even after a crash.
// FailedPrecondition, writing nothing, when `path` is not a regular file
// (CheckReplaceableFile).
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view data);

// Writes `data` to `path` with permission bits `mode`, also when the file
// existed with wider ones (secrets: keys and tokens at 0600). Like
// WriteFileAtomically, through a temporary file (created with `mode`)
// renamed over `path`; FailedPrecondition, writing nothing, when `path` is
// a symbolic link or anything else but a regular file.
absl::Status WriteFileWithMode(const std::string& path, absl::string_view data,
                               unsigned mode);

// The whole file. NotFound when it does not exist; FailedPrecondition when
// it is not a regular file; InvalidArgument, before reading, when it is
// larger than `max_bytes`.
absl::StatusOr<std::string> ReadFileToString(
    const std::string& path,
    int64_t max_bytes = std::numeric_limits<int64_t>::max());

// fsyncs a directory, making renames and creations in it durable.
absl::Status SyncDirectory(const std::string& path);

// rename(2), with an error naming both paths.
absl::Status RenamePath(const std::string& from, const std::string& to);

// `rm -rf`. OK when `path` does not exist.
absl::Status RemoveRecursively(const std::string& path);

// Names of the entries of a directory (without "." and ".."), sorted.
absl::StatusOr<std::vector<std::string>> ListDirectory(const std::string& path);

bool PathExists(const std::string& path);
bool IsDirectory(const std::string& path);

// Size of a file in bytes.
absl::StatusOr<int64_t> FileSize(const std::string& path);

// `path` made absolute against the working directory.
std::string AbsolutePath(const std::string& path);

// The directory part of `path` ("." when it has none).
std::string DirName(const std::string& path);

}  // namespace psflow

#endif  // PSFLOW_COMMON_FILE_UTIL_H_
