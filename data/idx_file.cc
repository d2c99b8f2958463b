#include "data/idx_file.h"

#include <zlib.h>

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "data/gzip_file.h"

namespace psflow {
namespace {

// An IDX dimension above this is a corrupt header, not a dataset.
constexpr int64_t kMaxElements = int64_t{1} << 34;

constexpr GzFileAdvice kIdxAdvice = {
    "data file",
    "check the path in the job config (Fashion-MNIST: apt-get install "
    "dataset-fashion-mnist)",
    "reinstall it (dataset-fashion-mnist) or download it again"};

// Reads exactly `n` bytes; returns how many it got (fewer at end of file).
// gzread reads raw files transparently.
absl::StatusOr<size_t> ReadFully(gzFile f, const std::string& path, void* out,
                                 size_t n) {
  size_t got = 0;
  while (got < n) {
    const unsigned chunk =
        static_cast<unsigned>(std::min<size_t>(n - got, 1u << 30));
    int r = gzread(f, static_cast<char*>(out) + got, chunk);
    if (r <= 0) {
      // A gzip stream cut short, its CRC trailer among the lost bytes,
      // ends (r == 0) like a whole one: only gzerror's Z_BUF_ERROR tells.
      // Unchecked, damaged data would be read without its CRC verified.
      absl::Status status = GzFileError(path, f, kIdxAdvice);
      if (!status.ok()) return status;
      if (r < 0) {
        return absl::DataLossError(absl::StrCat(path, ": cannot read"));
      }
      break;
    }
    got += static_cast<size_t>(r);
  }
  return got;
}

// Opens `path` and reads its IDX header; the file is left at the data.
absl::Status OpenIdx(const std::string& path, GzFile& f,
                     std::vector<int64_t>& dims) {
  absl::StatusOr<GzFile> opened = OpenGzFile(path, kIdxAdvice, 1 << 20);
  if (!opened.ok()) return opened.status();
  f = *std::move(opened);
  uint8_t header[4];
  absl::StatusOr<size_t> got = ReadFully(f.get(), path, header, 4);
  if (!got.ok()) return got.status();
  if (*got < 4 || header[0] != 0 || header[1] != 0) {
    return absl::DataLossError(absl::StrCat(
        path,
        ": not an IDX file (the first two bytes must be zero); is it "
        "the right file?"));
  }
  if (header[2] != 0x08) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: IDX element type 0x%02x is not supported; psflow reads "
        "unsigned-byte (0x08) files such as MNIST and Fashion-MNIST",
        path, header[2]));
  }
  const int rank = header[3];
  if (rank < 1 || rank > 4) {
    return absl::DataLossError(absl::StrCat(path, ": IDX header claims ", rank,
                                            " dimensions; expected 1 to 4"));
  }
  int64_t elements = 1;
  for (int d = 0; d < rank; ++d) {
    uint8_t b[4];
    got = ReadFully(f.get(), path, b, 4);
    if (!got.ok()) return got.status();
    if (*got < 4) {
      return absl::DataLossError(
          absl::StrCat(path, ": truncated inside the IDX header"));
    }
    const int64_t dim =
        (int64_t{b[0]} << 24) | (b[1] << 16) | (b[2] << 8) | b[3];
    // Divided, not multiplied: the product of hostile dimensions overflows.
    if (dim <= 0 || dim > kMaxElements / elements) {
      return absl::DataLossError(absl::StrCat(
          path, ": IDX dimension ", d, " is ", dim, "; the header is corrupt"));
    }
    elements *= dim;
    dims.push_back(dim);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> ReadIdxHeader(const std::string& path) {
  GzFile f;
  std::vector<int64_t> dims;
  absl::Status opened = OpenIdx(path, f, dims);
  if (!opened.ok()) return opened;
  return dims;
}

absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path) {
  GzFile f;
  IdxArray array;
  absl::Status opened = OpenIdx(path, f, array.dims);
  if (!opened.ok()) return opened;
  int64_t elements = 1;
  for (int64_t d : array.dims) elements *= d;
  // Grown as the data arrives, in bounded pieces: a header is only a
  // claim, and a small (or compressed) file claiming gigabytes must not
  // make the reader reserve them.
  constexpr int64_t kPiece = int64_t{16} << 20;
  absl::StatusOr<size_t> got;
  while (static_cast<int64_t>(array.data.size()) < elements) {
    const size_t had = array.data.size();
    const size_t want = static_cast<size_t>(
        std::min<int64_t>(kPiece, elements - static_cast<int64_t>(had)));
    array.data.resize(had + want);
    got = ReadFully(f.get(), path, array.data.data() + had, want);
    if (!got.ok()) return got.status();
    array.data.resize(had + *got);
    if (*got < want) break;
  }
  got = array.data.size();
  if (static_cast<int64_t>(*got) < elements) {
    return absl::DataLossError(
        absl::StrCat(path, ": truncated: the header promises ", elements,
                     " bytes of data but the file holds ", *got,
                     "; reinstall or download it again"));
  }
  uint8_t extra;
  got = ReadFully(f.get(), path, &extra, 1);
  if (!got.ok()) return got.status();
  if (*got != 0) {
    return absl::DataLossError(
        absl::StrCat(path, ": holds more data than its IDX header describes (",
                     elements, " bytes); is it the right file?"));
  }
  return array;
}

}  // namespace psflow
