// Reads IDX files, the format of MNIST and Fashion-MNIST
// (http://yann.lecun.com/exdb/mnist/), gzipped or raw:
//
//   bytes 0-1  zero
//   byte  2    element type (0x08 = unsigned byte; the only one psflow needs)
//   byte  3    number of dimensions
//   then one big-endian uint32 per dimension, then the elements, row-major.
//
// Every field is checked; a bad or truncated file is an error naming the
// file, what was wrong and how much data there was.
#ifndef PSFLOW_DATA_IDX_FILE_H_
#define PSFLOW_DATA_IDX_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace psflow {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // product(dims) elements
};

// NotFound when the file is missing; DataLoss when it is truncated,
// corrupt (bad gzip), or its header is not IDX; InvalidArgument for an IDX
// element type other than unsigned byte.
absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path);

// Reads the whole file as ReadIdxFile does, with its errors, through a
// bounded buffer: holds none of it. Returns the dimensions.
absl::StatusOr<std::vector<int64_t>> CheckIdxFile(const std::string& path);

// Only the dimensions, from the header (a few bytes read), with the same
// errors for the header as ReadIdxFile.
absl::StatusOr<std::vector<int64_t>> ReadIdxHeader(const std::string& path);

}  // namespace psflow

#endif  // PSFLOW_DATA_IDX_FILE_H_
