#include "cachemgr/crc32c.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "test_util.h"

namespace tencache {
namespace {

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(Crc32c(0, "123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32cPortable(0, "123456789", 9), 0xE3069283u);
  std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(Crc32c(0, zeros.data(), zeros.size()), 0x8A9136AAu);  // RFC 3720 B.4
  std::vector<uint8_t> ones(32, 0xFF);
  EXPECT_EQ(Crc32c(0, ones.data(), ones.size()), 0x62A8AB43u);
}

TEST(Crc32cTest, FastPathMatchesTableForManyLengths) {
  std::vector<uint8_t> data(3 * 8192 * 2 + 777);
  testing::FillPattern(data.data(), data.size(), 7);
  for (size_t n : {0ul, 1ul, 7ul, 8ul, 63ul, 4096ul, 24575ul, 24576ul, 24577ul, 49152ul, data.size()})
    EXPECT_EQ(Crc32c(0, data.data(), n), Crc32cPortable(0, data.data(), n)) << "length " << n;
}

TEST(Crc32cTest, IncrementalEqualsOneShot) {
  std::vector<uint8_t> data(100000);
  testing::FillPattern(data.data(), data.size(), 3);
  const uint32_t whole = Crc32c(0, data.data(), data.size());
  const uint32_t part = Crc32c(Crc32c(0, data.data(), 30001), data.data() + 30001, data.size() - 30001);
  EXPECT_EQ(whole, part);
}

TEST(Crc32cTest, DetectsSingleBitFlip) {
  std::vector<uint8_t> data(1 << 20);
  testing::FillPattern(data.data(), data.size(), 11);
  const uint32_t before = Crc32c(0, data.data(), data.size());
  data[123457] ^= 0x10;
  EXPECT_NE(before, Crc32c(0, data.data(), data.size()));
}

}  // namespace
}  // namespace tencache
