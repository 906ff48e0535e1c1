#include "common/checkpoint_dir.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace tencache {

namespace fs = std::filesystem;

std::string CheckpointFolder(const std::string& dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

std::vector<int64_t> CompleteCheckpoints(const std::string& dir) {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() != 13 || name.compare(0, 5, "step-") != 0 || e.is_symlink(ec) || !e.is_directory(ec)) continue;
    if (name.find_first_not_of("0123456789", 5) != std::string::npos) continue;
    steps.push_back(std::stoll(name.substr(5)));
  }
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

}  // namespace tencache
