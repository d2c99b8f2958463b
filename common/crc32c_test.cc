#include "common/crc32c.h"

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

TEST(Crc32cTest, MaskRoundTripsAndMatchesTensorFlow) {
  EXPECT_EQ(MaskCrc32c(0xe3069283u), 0xc78ab0e5u);
  for (uint32_t crc : {0u, 1u, 0xe3069283u, 0xffffffffu}) {
    EXPECT_EQ(UnmaskCrc32c(MaskCrc32c(crc)), crc);
  }
}

}  // namespace
}  // namespace psflow
