// IDX files (the Fashion-MNIST format) that tests write for their data.
#ifndef PSFLOW_TESTS_IDX_FILES_H_
#define PSFLOW_TESTS_IDX_FILES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace psflow::testing {

// Writes an uncompressed IDX file of unsigned bytes (magic 0x00 0x00 0x08
// rank, big-endian dimensions) holding `data`, which may be shorter than
// the dimensions promise, at a fresh path named after `name` (TempPath).
absl::StatusOr<std::string> WriteIdxFile(const std::string& name,
                                         const std::vector<int>& dims,
                                         const std::vector<uint8_t>& data);

}  // namespace psflow::testing

#endif  // PSFLOW_TESTS_IDX_FILES_H_
