#include "common/proc_meminfo.h"

#include <fstream>
#include <sstream>

namespace tencache {

std::optional<uint64_t> ParseDecimal(const std::string& s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t d = uint64_t(c - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

std::optional<uint64_t> MeminfoBytes(const std::string& field, const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    std::istringstream words(line.substr(field.size() + 1));
    std::string number, unit, extra;
    words >> number >> unit >> extra;
    const std::optional<uint64_t> kib = ParseDecimal(number);
    if (!kib || unit != "kB" || !extra.empty() || *kib > UINT64_MAX / 1024) return std::nullopt;
    return *kib * 1024;
  }
  return std::nullopt;
}

}  // namespace tencache
