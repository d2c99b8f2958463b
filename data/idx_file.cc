#include "data/idx_file.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
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
absl::StatusOr<size_t> ReadFully(DataFileReader& f, void* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    absl::StatusOr<size_t> r = f.Read(static_cast<char*>(out) + got, n - got);
    if (!r.ok()) return r.status();
    if (*r == 0) break;
    got += *r;
  }
  return got;
}

// Opens `path` and reads its IDX header; the file is left at the data.
absl::Status OpenIdx(const std::string& path, std::optional<DataFileReader>& f,
                     std::vector<int64_t>& dims) {
  absl::StatusOr<DataFileReader> opened =
      DataFileReader::Open(path, kIdxAdvice, 1 << 20);
  if (!opened.ok()) return opened.status();
  f.emplace(*std::move(opened));
  uint8_t header[4];
  absl::StatusOr<size_t> got = ReadFully(*f, header, 4);
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
    got = ReadFully(*f, b, 4);
    if (!got.ok()) return got.status();
    if (*got < 4) {
      return absl::DataLossError(
          absl::StrCat(path, ": truncated inside the IDX header"));
    }
    const int64_t dim =
        (int64_t{b[0]} << 24) | (b[1] << 16) | (b[2] << 8) | b[3];
    if (dim <= 0) {
      return absl::DataLossError(absl::StrCat(
          path, ": IDX dimension ", d, " is ", dim, "; the header is corrupt"));
    }
    // Divided, not multiplied: the product of hostile dimensions overflows.
    if (dim > kMaxElements / elements) {
      std::vector<int64_t> claimed = dims;
      claimed.push_back(dim);
      return absl::DataLossError(absl::StrCat(
          path, ": the IDX header's dimensions [", absl::StrJoin(claimed, ", "),
          rank > d + 1 ? ", ..." : "",
          "] claim more than 2^34 elements; the header is corrupt"));
    }
    elements *= dim;
    dims.push_back(dim);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> ReadIdxHeader(const std::string& path) {
  std::optional<DataFileReader> f;
  std::vector<int64_t> dims;
  absl::Status opened = OpenIdx(path, f, dims);
  if (!opened.ok()) return opened;
  return dims;
}

namespace {

// Reads the `elements` bytes after the header into `keep`, or through a
// bounded buffer when it is null, and checks that the file holds exactly
// them (a gzip stream's CRC included).
absl::Status ReadIdxData(DataFileReader& f, const std::string& path,
                         int64_t elements, std::vector<uint8_t>* keep) {
  // Filled as the data arrives, in bounded pieces: a header is only a
  // claim, and a small (or compressed) file claiming gigabytes must not
  // make the reader reserve more than it could hold.
  constexpr int64_t kPiece = int64_t{16} << 20;
  std::vector<uint8_t> scratch;
  if (keep != nullptr) {
    // Room for all of it at once (growing by doubling peaked at twice the
    // data), but never more than the file can hold.
    keep->reserve(
        static_cast<size_t>(std::min<int64_t>(elements, f.MaxContentBytes())));
  }
  int64_t read = 0;
  while (read < elements) {
    const size_t want =
        static_cast<size_t>(std::min<int64_t>(kPiece, elements - read));
    uint8_t* into = nullptr;
    if (keep != nullptr) {
      keep->resize(static_cast<size_t>(read) + want);
      into = keep->data() + read;
    } else {
      scratch.resize(want);
      into = scratch.data();
    }
    absl::StatusOr<size_t> got = ReadFully(f, into, want);
    if (!got.ok()) return got.status();
    read += static_cast<int64_t>(*got);
    if (keep != nullptr) keep->resize(static_cast<size_t>(read));
    if (*got < want) break;
  }
  if (read < elements) {
    return absl::DataLossError(
        absl::StrCat(path, ": truncated: the header promises ", elements,
                     " bytes of data but the file holds ", read,
                     "; reinstall or download it again"));
  }
  uint8_t extra;
  absl::StatusOr<size_t> got = ReadFully(f, &extra, 1);
  if (!got.ok()) return got.status();
  if (*got != 0) {
    return absl::DataLossError(
        absl::StrCat(path, ": holds more data than its IDX header describes (",
                     elements, " bytes); is it the right file?"));
  }
  return absl::OkStatus();
}

int64_t ElementsOf(const std::vector<int64_t>& dims) {
  int64_t elements = 1;
  for (int64_t d : dims) elements *= d;  // bounded by OpenIdx
  return elements;
}

}  // namespace

absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path) {
  std::optional<DataFileReader> f;
  IdxArray array;
  absl::Status opened = OpenIdx(path, f, array.dims);
  if (!opened.ok()) return opened;
  absl::Status read =
      ReadIdxData(*f, path, ElementsOf(array.dims), &array.data);
  if (!read.ok()) return read;
  return array;
}

absl::StatusOr<std::vector<int64_t>> CheckIdxFile(const std::string& path) {
  std::optional<DataFileReader> f;
  std::vector<int64_t> dims;
  absl::Status opened = OpenIdx(path, f, dims);
  if (!opened.ok()) return opened;
  absl::Status read = ReadIdxData(*f, path, ElementsOf(dims), nullptr);
  if (!read.ok()) return read;
  return dims;
}

}  // namespace psflow
