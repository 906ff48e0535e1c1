#include "common/text_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace tencache {
namespace {

namespace fs = std::filesystem;

std::string Read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(WriteFileAtomically, ReplacesWholeAndLeavesNoTemporaryFile) {
  const fs::path dir = fs::temp_directory_path() / ("tencache_text_file_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path f = dir / "run.json";
  ASSERT_TRUE(WriteFileAtomically(f.string(), "first\n").ok());
  // A reader that opened the old file keeps reading it whole: the new one is a
  // new inode renamed over the name, not the old one truncated.
  std::ifstream old(f);
  ASSERT_TRUE(WriteFileAtomically(f.string(), std::string(100000, 'x')).ok());
  std::stringstream seen;
  seen << old.rdbuf();
  EXPECT_EQ(seen.str(), "first\n");
  EXPECT_EQ(Read(f), std::string(100000, 'x'));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1) << "a temporary file was left";
  // A folder that cannot be written: an error naming the path, nothing left.
  const Status bad = WriteFileAtomically((dir / "absent" / "x.json").string(), "y");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("absent/x.json: cannot write"), std::string::npos) << bad.message();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tencache
