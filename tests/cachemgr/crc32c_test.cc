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

// RFC 3720 B.4 vectors through both implementations.
TEST(Crc32cTest, Rfc3720VectorsBothImplementations) {
  uint8_t inc[32], dec[32];
  for (int i = 0; i < 32; ++i) {
    inc[i] = static_cast<uint8_t>(i);
    dec[i] = static_cast<uint8_t>(31 - i);
  }
  EXPECT_EQ(Crc32c(0, inc, 32), 0x46DD794Eu);
  EXPECT_EQ(Crc32cPortable(0, inc, 32), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(0, dec, 32), 0x113FDB5Cu);
  EXPECT_EQ(Crc32cPortable(0, dec, 32), 0x113FDB5Cu);
}

TEST(Crc32cTest, UsesTheCrc32InstructionWhereTheCpuHasIt) {
#if defined(__x86_64__)
  EXPECT_STREQ(Crc32cImplementation(), __builtin_cpu_supports("sse4.2") ? "sse4.2" : "table");
#else
  EXPECT_STREQ(Crc32cImplementation(), "table");
#endif
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
