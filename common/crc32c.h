// CRC-32C (Castagnoli), the checksum of TFRecord files (TensorBoard event
// files) and of psflow's checkpoints, and its "masked" form, which keeps a
// CRC stored beside the data it covers from being mistaken for data.
#ifndef PSFLOW_COMMON_CRC32C_H_
#define PSFLOW_COMMON_CRC32C_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace psflow {

// CRC-32C of `data`, continuing from `crc` (0 to start).
// Uses SSE4.2's crc32 instruction where the CPU has it.
uint32_t Crc32c(absl::string_view data, uint32_t crc = 0);

// The table-driven fallback, for tests comparing the two.
uint32_t Crc32cPortableForTesting(absl::string_view data, uint32_t crc = 0);

// TensorFlow's and leveldb's mask: rotate right by 15, add a constant.
inline uint32_t MaskCrc32c(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

inline uint32_t UnmaskCrc32c(uint32_t masked) {
  const uint32_t rotated = masked - 0xa282ead8u;
  return (rotated >> 17) | (rotated << 15);
}

}  // namespace psflow

#endif  // PSFLOW_COMMON_CRC32C_H_
