// Inputs that once made a parser fail (found with the fuzz targets of
// tests/fuzz), replayed as the targets read them: every file in
// tests/fuzz/regressions/job_parser/ through ParseJobText (its "#--set" lines as
// overrides), every file in tests/fuzz/regressions/safetensors_header/ through
// ParseSafetensorsHeader (its first 8 bytes, little-endian, the data size).
// Each must give an ok result or a clean error; a crash, a hang (CTest's
// timeout) or an exception fails the test.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/job_spec.h"
#include "common/safetensors.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> Inputs(const std::string& target) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(TENCACHE_SOURCE_DIR) / "tests/fuzz/regressions" / target)) {
    if (e.is_regular_file()) out.push_back(e.path());
  }
  return out;
}

std::string Read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream b;
  b << in.rdbuf();
  return b.str();
}

TEST(FuzzRegressions, JobParserGivesAJobOrACleanError) {
  const std::vector<fs::path> inputs = Inputs("job_parser");
  EXPECT_FALSE(inputs.empty());
  for (const fs::path& p : inputs) {
    const std::string text = Read(p);
    std::vector<std::string> overrides;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("#--set ", 0) == 0 && line.size() > 7) overrides.push_back(line.substr(7));
    }
    StatusOr<JobSpec> job = ParseJobText(text, "fuzz/job.yaml", overrides);
    if (job.ok()) continue;
    EXPECT_TRUE(job.status().code() == StatusCode::kInvalidArgument || job.status().code() == StatusCode::kNotFound)
        << p << ": " << job.status().ToString();
    EXPECT_FALSE(job.status().message().empty()) << p;
    EXPECT_LT(job.status().message().size(), 4096u) << p;
  }
}

TEST(FuzzRegressions, SafetensorsHeaderGivesTensorsOrACleanError) {
  const std::vector<fs::path> inputs = Inputs("safetensors_header");
  EXPECT_FALSE(inputs.empty());
  for (const fs::path& p : inputs) {
    const std::string bytes = Read(p);
    ASSERT_GE(bytes.size(), 8u) << p;
    uint64_t data_bytes = 0;
    for (int i = 0; i < 8; ++i) data_bytes |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
    StatusOr<std::vector<StTensor>> tensors =
        ParseSafetensorsHeader(std::string_view(bytes).substr(8), data_bytes, "fuzz.safetensors");
    if (tensors.ok()) continue;
    EXPECT_EQ(tensors.status().code(), StatusCode::kInvalidArgument) << p;
    EXPECT_EQ(tensors.status().message().rfind("fuzz.safetensors: ", 0), 0u) << p;
    EXPECT_LT(tensors.status().message().size(), 4096u) << p;
  }
}

}  // namespace
}  // namespace tencache
