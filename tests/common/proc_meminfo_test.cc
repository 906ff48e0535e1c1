#include "common/proc_meminfo.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace tencache {
namespace {

namespace fs = std::filesystem;

fs::path Write(const std::string& text) {
  const fs::path p = fs::temp_directory_path() / ("tencache_meminfo_" + std::to_string(getpid()));
  std::ofstream(p) << text;
  return p;
}

TEST(ProcMeminfo, ReadsAFieldInBytes) {
  const fs::path p = Write("MemTotal:       16318664 kB\nMemFree:  1 kB\nMemAvailable:   12000000 kB\n");
  EXPECT_EQ(MeminfoBytes("MemTotal", p), std::optional<uint64_t>(16318664ull * 1024));
  EXPECT_EQ(MeminfoBytes("MemAvailable", p), std::optional<uint64_t>(12000000ull * 1024));
  EXPECT_EQ(MeminfoBytes("Mem", p), std::nullopt);  // a prefix of a field is not the field
  EXPECT_EQ(MeminfoBytes("SwapTotal", p), std::nullopt);
  fs::remove(p);
}

TEST(ProcMeminfo, MalformedLinesAndMissingFilesAreUnknown) {
  for (const char* text : {"MemTotal: 12 MB\n", "MemTotal: -12 kB\n", "MemTotal: 12 kB extra\n", "MemTotal:\n",
                           "MemTotal: 99999999999999999999 kB\n"}) {
    const fs::path p = Write(text);
    EXPECT_EQ(MeminfoBytes("MemTotal", p), std::nullopt) << text;
    fs::remove(p);
  }
  EXPECT_EQ(MeminfoBytes("MemTotal", "/nonexistent/meminfo"), std::nullopt);
  EXPECT_EQ(ParseDecimal("18446744073709551615"), std::optional<uint64_t>(UINT64_MAX));
  EXPECT_EQ(ParseDecimal("18446744073709551616"), std::nullopt);
  EXPECT_EQ(ParseDecimal(""), std::nullopt);
}

TEST(ProcMeminfo, ThisMachineHasMemory) {
  const std::optional<uint64_t> total = MeminfoBytes("MemTotal");
  ASSERT_TRUE(total.has_value());
  EXPECT_GT(*total, uint64_t(64) << 20);
}

}  // namespace
}  // namespace tencache
