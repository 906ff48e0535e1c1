#include "common/byte_size.h"

#include <gtest/gtest.h>

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

TEST(ParseByteSize, RejectsWhatDoesNotParse) {
  for (const char* bad : {"", "abc", "-1GiB", "12 parsecs", "GiB", "1.5.3G", "1e400"}) {
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
}

}  // namespace
}  // namespace tencache
