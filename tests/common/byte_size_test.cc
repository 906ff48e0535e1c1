#include "common/byte_size.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tencache {
namespace {

TEST(ParseByteSize, BinaryAndDecimalUnits) {
  EXPECT_EQ(*ParseByteSize("20GiB"), 20 * kGiB);
  EXPECT_EQ(*ParseByteSize("20 GiB"), 20 * kGiB);
  EXPECT_EQ(*ParseByteSize("8MiB"), 8 * kMiB);
  EXPECT_EQ(*ParseByteSize("8m"), 8 * kMiB);
  EXPECT_EQ(*ParseByteSize("1.5TB"), 1500000000000ull);
  EXPECT_EQ(*ParseByteSize("512MB"), 512000000ull);
  EXPECT_EQ(*ParseByteSize("4096"), 4096ull);
  EXPECT_EQ(*ParseByteSize("1e9"), 1000000000ull);
  EXPECT_EQ(*ParseByteSize("2KiB"), 2048ull);
  EXPECT_EQ(*ParseByteSize("0.5gib"), kGiB / 2);
}

TEST(ParseByteSize, SizesAboveTwoToTheSixtyThreeKeepTheirValue) {
  // Found building the fuzz targets: these came back as 2^63 (llround's long long overflowed).
  EXPECT_EQ(*ParseByteSize("10000000TB"), 10000000000000000000ull);
  EXPECT_EQ(*ParseByteSize("1.7e19"), 17000000000000000000ull);
  EXPECT_EQ(*ParseByteSize("9223372036854775808"), 9223372036854775808ull);
  EXPECT_FALSE(ParseByteSize("1.8e19").ok());
}

TEST(ParseByteSize, SizesPastFourGibAreExact) {
  // A 2B-parameter run's NVMe file and shards: past 2^32, odd byte counts included.
  EXPECT_EQ(*ParseByteSize("4294967297"), 4294967297ull);
  EXPECT_EQ(*ParseByteSize("4GiB"), uint64_t{1} << 32);
  EXPECT_EQ(*ParseByteSize("4.5GiB"), 4831838208ull);
  EXPECT_EQ(*ParseByteSize("30GB"), 30000000000ull);
  EXPECT_EQ(FormatBytes(uint64_t{30000000000}), "27.9 GiB");
  EXPECT_EQ(FormatBytes((uint64_t{1} << 32) + 1), "4.00 GiB");
}

TEST(ParseByteSize, RejectsWhatDoesNotParse) {
  // A NUL byte inside the text is not its end ("5\0GB" was read as 5 bytes).
  const std::vector<std::string> bad_texts = {"", "abc", "-1GiB", "12 parsecs", "GiB", "1.5.3G", "1e400",
                                              std::string("5\0GB", 4), std::string("5GiB\0", 5)};
  for (const std::string& bad : bad_texts) {
    StatusOr<uint64_t> r = ParseByteSize(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("expected a number with an optional unit"), std::string::npos);
  }
}

TEST(FormatBytes, ThreeSignificantDigits) {
  EXPECT_EQ(FormatBytes(uint64_t{0}), "0 B");
  EXPECT_EQ(FormatBytes(uint64_t{1023}), "1023 B");
  EXPECT_EQ(FormatBytes(3 * kGiB / 2), "1.50 GiB");
  EXPECT_EQ(FormatBytes(512 * kMiB), "512 MiB");
  EXPECT_EQ(FormatBytes(20 * kTiB), "20.0 TiB");
  // What it prints as PiB can be typed back.
  EXPECT_EQ(FormatBytes(3 * kPiB), "3.00 PiB");
  EXPECT_EQ(*ParseByteSize("3.00 PiB"), 3 * kPiB);
  EXPECT_EQ(*ParseByteSize("2PB"), uint64_t(2e15));
}

}  // namespace
}  // namespace tencache
