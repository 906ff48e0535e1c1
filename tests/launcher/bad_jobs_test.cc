// Hostile job files (tests/bad_jobs/, listed with what each message must say in
// expected.tsv): `tencache-launch plan FILE` exits 2 — never a crash, a hang or
// a success — with a message that names the real problem, and never echoes an
// enormous value whole.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "command_runner.h"

namespace tencache {
namespace {

struct BadJob {
  std::string file, expected;
};

std::vector<BadJob> Cases() {
  std::vector<BadJob> out;
  std::ifstream in(std::string(TENCACHE_SOURCE_DIR) + "/tests/bad_jobs/expected.tsv");
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.find('\t');
    if (tab != std::string::npos) out.push_back({line.substr(0, tab), line.substr(tab + 1)});
  }
  return out;
}

class BadJobTest : public ::testing::TestWithParam<BadJob> {};

TEST_P(BadJobTest, ExitsTwoNamingTheProblem) {
  const BadJob& c = GetParam();
  const std::string path = std::string(TENCACHE_SOURCE_DIR) + "/tests/bad_jobs/" + c.file;
  testing::CommandResult r =
      testing::RunCommand("timeout 60 " + std::string(TENCACHE_LAUNCH_BIN) + " plan '" + path + "' 2>&1");
  EXPECT_EQ(r.code, 2) << r.out.substr(0, 2000);
  EXPECT_NE(r.out.find(c.expected), std::string::npos) << "expected '" << c.expected << "' in:\n" << r.out.substr(0, 2000);
  EXPECT_LT(r.out.size(), 4096u) << "the message echoes too much";
}

std::string Name(const ::testing::TestParamInfo<BadJob>& info) {
  std::string n;
  for (char ch : info.param.file) n += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(BadJobs, BadJobTest, ::testing::ValuesIn(Cases()), Name);

TEST(BadJobs, AtLeastThirtyFiles) { EXPECT_GE(Cases().size(), 30u); }

}  // namespace
}  // namespace tencache
