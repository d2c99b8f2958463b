#ifndef PSFLOW_DATA_GZIP_FILE_H_
#define PSFLOW_DATA_GZIP_FILE_H_

// Reading data files that may be gzip-compressed, front to back, with the
// errors the data readers share. zlib's inflate drives the gzip members
// itself (not gzread): gzread ignores whatever follows the last gzip
// member, so bytes appended to a compressed file (`cat more.txt >>
// train.txt.gz`) were dropped without a word.

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow {

// What a data file's errors tell its user: `kind` names the file in
// messages ("data file", "Criteo data file"); `missing_hint` follows a
// missing file's error; `redo_hint` follows a truncated or corrupt one's
// (how to get the file again, e.g. "reinstall it (dataset-fashion-mnist)").
struct GzFileAdvice {
  absl::string_view kind;
  absl::string_view missing_hint;
  absl::string_view redo_hint;
};

// One data file's content: a gzip file (one member or several, as gzip
// and pigz write them) decompressed, with every member's CRC and length
// checked; any other file as it is. Not thread-safe; movable.
class DataFileReader {
 public:
  // Opens `path`, a regular file only (a FIFO or device could block or
  // never end), reading it `buffer_bytes` at a time. NotFound (with
  // `advice.missing_hint`), FailedPrecondition, or ResourceExhausted.
  static absl::StatusOr<DataFileReader> Open(const std::string& path,
                                             const GzFileAdvice& advice,
                                             size_t buffer_bytes);

  DataFileReader(DataFileReader&& other) noexcept;
  DataFileReader& operator=(DataFileReader&& other) noexcept;
  DataFileReader(const DataFileReader&) = delete;
  DataFileReader& operator=(const DataFileReader&) = delete;
  ~DataFileReader();

  // Up to `n` bytes of the content into `out`: fewer only at its end, 0
  // once it ended. DataLoss naming the file and `advice.redo_hint` for
  // gzip data cut short (a truncated file ends like a whole one until its
  // trailer is missed), corrupt gzip data, or bytes after the last gzip
  // member that are no gzip member.
  absl::StatusOr<size_t> Read(void* out, size_t n);

  // Whether the file is gzip data.
  bool compressed() const { return stream_ != nullptr; }
  // The file's size on disk when it was opened.
  int64_t file_bytes() const { return file_bytes_; }
  // At most how many content bytes the file can hold: its size, or, for
  // gzip data, 1032 times it (deflate's largest ratio). Bounds what a
  // header's claim may make a reader reserve.
  int64_t MaxContentBytes() const;

 private:
  DataFileReader() = default;
  void Close();
  // Moves the unread input to the front of the buffer and reads more
  // after it; sets eof_ at the file's end.
  absl::Status Refill();
  // After a member's end: another member, the file's end, or an error.
  absl::Status NextMember();
  absl::StatusOr<size_t> ReadRaw(char* out, size_t n);
  absl::StatusOr<size_t> ReadCompressed(char* out, size_t n);
  absl::Status Truncated() const;
  absl::Status Corrupt(const char* detail) const;

  std::string path_;
  GzFileAdvice advice_;
  int fd_ = -1;
  std::vector<unsigned char> in_;
  // The unread input, in_[in_begin_, in_end_).
  size_t in_begin_ = 0;
  size_t in_end_ = 0;
  bool eof_ = false;
  bool finished_ = false;
  int64_t file_bytes_ = 0;
  // Heap-held: zlib's state points back at its z_stream.
  std::unique_ptr<z_stream> stream_;
};

}  // namespace psflow

#endif  // PSFLOW_DATA_GZIP_FILE_H_
