#include "common/crc32c.h"

#include <random>
#include <string>

#include "gtest/gtest.h"

namespace psflow {
namespace {

TEST(Crc32cTest, MatchesTheStandardCheckValue) {
  EXPECT_EQ(Crc32c("123456789"), 0xe3069283u);  // RFC 3720's check value
  EXPECT_EQ(Crc32c(""), 0u);
}

TEST(Crc32cTest, ContinuesAcrossPieces) {
  EXPECT_EQ(Crc32c("6789", Crc32c("12345")), Crc32c("123456789"));
}

TEST(Crc32cTest, FastPathMatchesTheTableAtEveryLengthAndAlignment) {
  std::mt19937 rng(7);
  std::string data(3 * 4096 * 3 + 123, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  for (size_t length :
       {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{4095},
        size_t{3 * 4096 - 1}, size_t{3 * 4096}, size_t{3 * 4096 + 9},
        size_t{6 * 4096 + 5}, data.size() - 3}) {
    for (size_t start : {size_t{0}, size_t{1}, size_t{3}}) {
      absl::string_view piece(data.data() + start, length);
      EXPECT_EQ(Crc32c(piece), Crc32cPortableForTesting(piece))
          << "length " << length << " start " << start;
      EXPECT_EQ(Crc32c(piece, 0x12345678u),
                Crc32cPortableForTesting(piece, 0x12345678u));
    }
  }
}

TEST(Crc32cTest, MaskRoundTripsAndMatchesTensorFlow) {
  EXPECT_EQ(MaskCrc32c(0xe3069283u), 0xc78ab0e5u);
  for (uint32_t crc : {0u, 1u, 0xe3069283u, 0xffffffffu}) {
    EXPECT_EQ(UnmaskCrc32c(MaskCrc32c(crc)), crc);
  }
}

}  // namespace
}  // namespace psflow
