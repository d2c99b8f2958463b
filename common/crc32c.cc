#include "common/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace psflow {
namespace {

// Byte-at-a-time table for the reflected polynomial 0x82f63b78.
constexpr std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc >> 1) ^ ((crc & 1) ? 0x82f63b78u : 0u);
    }
    table[i] = crc;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kTable = MakeTable();

// Works on the inverted CRC.
uint32_t TableCrc(const unsigned char* p, size_t n, uint32_t crc) {
  for (size_t i = 0; i < n; ++i) crc = kTable[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
// SSE4.2's crc32 instruction computes exactly CRC-32C. Three independent
// streams hide its 3-cycle latency: checkpoints checksum gigabytes, and a
// single stream (~8 bytes per 3 cycles) would be slower than the disk.
// The streams are combined by running the first two CRCs over zero blocks
// the length of the rest; that "shift" is done with the same instruction.
// Small inputs or leftovers: one stream.
__attribute__((target("sse4.2"))) uint64_t SingleStream(const unsigned char* q,
                                                        size_t len,
                                                        uint64_t c) {
  while (len >= 8) {
    uint64_t word;
    std::memcpy(&word, q, 8);
    c = _mm_crc32_u64(c, word);
    q += 8;
    len -= 8;
  }
  while (len > 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *q++);
    --len;
  }
  return c;
}

__attribute__((target("sse4.2"))) uint32_t HardwareCrc(const unsigned char* p,
                                                       size_t n, uint32_t crc) {
  uint64_t c0 = crc;
  constexpr size_t kBlock = 4096;  // bytes per stream per round
  static const std::array<std::array<uint32_t, 256>, 4> kShift = [] {
    // kShift[k][b]: the CRC of byte b followed by kBlock zero bytes,
    // spread over the 4 bytes of a 32-bit CRC (linear in its input).
    std::array<std::array<uint32_t, 256>, 4> table{};
    for (int byte = 0; byte < 4; ++byte) {
      for (uint32_t v = 0; v < 256; ++v) {
        uint32_t c = v << (8 * byte);
        for (size_t i = 0; i < kBlock; ++i) {
          c = kTable[c & 0xff] ^ (c >> 8);
        }
        table[byte][v] = c;
      }
    }
    return table;
  }();
  auto shift = [&](uint32_t c) {
    return kShift[0][c & 0xff] ^ kShift[1][(c >> 8) & 0xff] ^
           kShift[2][(c >> 16) & 0xff] ^ kShift[3][c >> 24];
  };
  while (n >= 3 * kBlock) {
    uint64_t c1 = 0, c2 = 0;
    const unsigned char* a = p;
    const unsigned char* b = p + kBlock;
    const unsigned char* d = p + 2 * kBlock;
    for (size_t i = 0; i < kBlock; i += 8) {
      uint64_t wa, wb, wd;
      std::memcpy(&wa, a + i, 8);
      std::memcpy(&wb, b + i, 8);
      std::memcpy(&wd, d + i, 8);
      c0 = _mm_crc32_u64(c0, wa);
      c1 = _mm_crc32_u64(c1, wb);
      c2 = _mm_crc32_u64(c2, wd);
    }
    // crc(A|B|D) = shift(shift(cA) ^ cB) ^ cD, streams B, D started at 0.
    c0 = shift(shift(static_cast<uint32_t>(c0)) ^ static_cast<uint32_t>(c1)) ^
         static_cast<uint32_t>(c2);
    p += 3 * kBlock;
    n -= 3 * kBlock;
  }
  return static_cast<uint32_t>(SingleStream(p, n, c0));
}

const bool kHasSse42 = __builtin_cpu_supports("sse4.2");
#endif

}  // namespace

uint32_t Crc32c(absl::string_view data, uint32_t crc) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
#if defined(__x86_64__)
  if (kHasSse42) return ~HardwareCrc(p, data.size(), ~crc);
#endif
  return ~TableCrc(p, data.size(), ~crc);
}

uint32_t Crc32cPortableForTesting(absl::string_view data, uint32_t crc) {
  return ~TableCrc(reinterpret_cast<const unsigned char*>(data.data()),
                   data.size(), ~crc);
}

}  // namespace psflow
