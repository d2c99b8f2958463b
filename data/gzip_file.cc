#include "data/gzip_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace psflow {
namespace {

constexpr unsigned char kGzipMagic[2] = {0x1f, 0x8b};

bool StartsWithGzipMagic(const unsigned char* bytes, size_t n) {
  return n >= 2 && bytes[0] == kGzipMagic[0] && bytes[1] == kGzipMagic[1];
}

}  // namespace

absl::StatusOr<DataFileReader> DataFileReader::Open(const std::string& path,
                                                    const GzFileAdvice& advice,
                                                    size_t buffer_bytes) {
  absl::StatusOr<int> fd = OpenRegularFile(path);
  if (!fd.ok()) {
    const std::string message = absl::StrCat("cannot open ", advice.kind, " ",
                                             path, ": ", fd.status().message());
    if (absl::IsNotFound(fd.status())) {
      return absl::NotFoundError(
          absl::StrCat(message, "; ", advice.missing_hint));
    }
    return absl::FailedPreconditionError(message);
  }
  DataFileReader reader;
  struct stat st;
  if (fstat(*fd, &st) == 0) reader.file_bytes_ = st.st_size;
  reader.path_ = path;
  reader.advice_ = advice;
  reader.fd_ = *fd;
  reader.in_.resize(std::max<size_t>(buffer_bytes, 4096));
  // Enough of the file to tell gzip from anything else.
  while (reader.in_end_ < 2 && !reader.eof_) {
    if (absl::Status read = reader.Refill(); !read.ok()) return read;
  }
  if (!StartsWithGzipMagic(reader.in_.data(), reader.in_end_)) return reader;
  reader.stream_ = std::make_unique<z_stream>();
  z_stream& z = *reader.stream_;
  std::memset(&z, 0, sizeof(z));
  // 16 + MAX_WBITS: the gzip wrapper, its header and CRC-32 trailer.
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
    reader.stream_.reset();
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot open ", advice.kind, " ", path, ": out of memory"));
  }
  z.next_in = reader.in_.data();
  z.avail_in = static_cast<uInt>(reader.in_end_);
  return reader;
}

DataFileReader::DataFileReader(DataFileReader&& other) noexcept {
  *this = std::move(other);
}

DataFileReader& DataFileReader::operator=(DataFileReader&& other) noexcept {
  if (this == &other) return *this;
  Close();
  path_ = std::move(other.path_);
  advice_ = other.advice_;
  fd_ = std::exchange(other.fd_, -1);
  // The buffer's storage moves with it: z_stream's next_in stays valid.
  in_ = std::move(other.in_);
  file_bytes_ = other.file_bytes_;
  in_begin_ = other.in_begin_;
  in_end_ = other.in_end_;
  eof_ = other.eof_;
  finished_ = other.finished_;
  stream_ = std::move(other.stream_);
  return *this;
}

DataFileReader::~DataFileReader() { Close(); }

int64_t DataFileReader::MaxContentBytes() const {
  constexpr int64_t kDeflateMaxRatio = 1032;
  if (!compressed()) return file_bytes_;
  return file_bytes_ > std::numeric_limits<int64_t>::max() / kDeflateMaxRatio
             ? std::numeric_limits<int64_t>::max()
             : file_bytes_ * kDeflateMaxRatio;
}

void DataFileReader::Close() {
  if (stream_ != nullptr) {
    inflateEnd(stream_.get());
    stream_.reset();
  }
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

absl::Status DataFileReader::Refill() {
  if (stream_ != nullptr) {
    in_begin_ = static_cast<size_t>(stream_->next_in - in_.data());
    in_end_ = in_begin_ + stream_->avail_in;
  }
  if (in_begin_ > 0) {
    std::memmove(in_.data(), in_.data() + in_begin_, in_end_ - in_begin_);
    in_end_ -= in_begin_;
    in_begin_ = 0;
  }
  while (in_end_ < in_.size()) {
    const ssize_t got = read(fd_, in_.data() + in_end_, in_.size() - in_end_);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      return absl::DataLossError(
          absl::StrCat(path_, ": cannot read (", std::strerror(errno), ")"));
    }
    if (got == 0) eof_ = true;
    in_end_ += static_cast<size_t>(got);
    break;
  }
  if (stream_ != nullptr) {
    stream_->next_in = in_.data();
    stream_->avail_in = static_cast<uInt>(in_end_);
  }
  return absl::OkStatus();
}

absl::Status DataFileReader::Truncated() const {
  return absl::DataLossError(absl::StrCat(
      path_, ": the gzip data ends early (the file is truncated or damaged); ",
      advice_.redo_hint));
}

absl::Status DataFileReader::Corrupt(const char* detail) const {
  return absl::DataLossError(absl::StrCat(
      path_, ": cannot decompress (", detail != nullptr ? detail : "bad data",
      "); the file is corrupt: ", advice_.redo_hint));
}

absl::StatusOr<size_t> DataFileReader::Read(void* out, size_t n) {
  if (finished_ || n == 0) return 0;
  char* into = static_cast<char*>(out);
  return stream_ != nullptr ? ReadCompressed(into, n) : ReadRaw(into, n);
}

absl::StatusOr<size_t> DataFileReader::ReadRaw(char* out, size_t n) {
  size_t produced = 0;
  while (produced < n) {
    if (in_begin_ == in_end_) {
      if (eof_) break;
      in_begin_ = in_end_ = 0;
      if (absl::Status read = Refill(); !read.ok()) return read;
      continue;
    }
    const size_t take = std::min(n - produced, in_end_ - in_begin_);
    std::memcpy(out + produced, in_.data() + in_begin_, take);
    in_begin_ += take;
    produced += take;
  }
  if (produced == 0) finished_ = true;
  return produced;
}

absl::StatusOr<size_t> DataFileReader::ReadCompressed(char* out, size_t n) {
  z_stream& z = *stream_;
  size_t produced = 0;
  while (produced < n && !finished_) {
    if (z.avail_in == 0 && !eof_) {
      if (absl::Status read = Refill(); !read.ok()) return read;
    }
    // At most 1 GiB a call: avail_out is 32 bits.
    const size_t room = std::min<size_t>(n - produced, size_t{1} << 30);
    z.next_out = reinterpret_cast<Bytef*>(out + produced);
    z.avail_out = static_cast<uInt>(room);
    const int result = inflate(&z, Z_NO_FLUSH);
    produced += room - z.avail_out;
    if (result == Z_STREAM_END) {
      if (absl::Status next = NextMember(); !next.ok()) return next;
      continue;
    }
    if (result == Z_BUF_ERROR) {
      // No progress possible without more input: the file's end inside a
      // member is a truncated file.
      if (z.avail_in == 0 && eof_) return Truncated();
      if (z.avail_in > 0) return Corrupt("no progress");
      continue;
    }
    if (result != Z_OK) return Corrupt(z.msg);
  }
  return produced;
}

absl::Status DataFileReader::NextMember() {
  z_stream& z = *stream_;
  while (z.avail_in < 2 && !eof_) {
    if (absl::Status read = Refill(); !read.ok()) return read;
  }
  if (z.avail_in == 0) {
    finished_ = true;
    return absl::OkStatus();
  }
  if (!StartsWithGzipMagic(z.next_in, z.avail_in)) {
    // Zeros padding the file to a block (tapes, some writers): gzip
    // accepts them, and so does this.
    while (std::all_of(z.next_in, z.next_in + z.avail_in,
                       [](unsigned char b) { return b == 0; })) {
      z.next_in += z.avail_in;
      z.avail_in = 0;
      if (eof_) {
        finished_ = true;
        return absl::OkStatus();
      }
      if (absl::Status read = Refill(); !read.ok()) return read;
    }
    return absl::DataLossError(absl::StrCat(
        path_,
        ": holds bytes after its gzip data that are not gzip (was something "
        "appended to the compressed file? compress it whole, or append "
        "gzip-compressed data only); ",
        advice_.redo_hint));
  }
  if (inflateReset(&z) != Z_OK) return Corrupt(z.msg);
  return absl::OkStatus();
}

}  // namespace psflow
