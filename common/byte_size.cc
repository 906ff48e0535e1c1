#include "common/byte_size.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace tencache {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool UnitMultiplier(std::string_view unit, double* mult) {
  const std::string u = Lower(unit);
  struct Entry { const char* name; double mult; };
  static const Entry kUnits[] = {
      {"", 1.0},        {"b", 1.0},
      {"k", 1024.0},    {"kib", 1024.0},   {"kb", 1e3},
      {"m", 1048576.0}, {"mib", 1048576.0}, {"mb", 1e6},
      {"g", double(kGiB)}, {"gib", double(kGiB)}, {"gb", 1e9},
      {"t", double(kTiB)}, {"tib", double(kTiB)}, {"tb", 1e12},
      {"p", double(kPiB)}, {"pib", double(kPiB)}, {"pb", 1e15},  // what FormatBytes prints, typed back
  };
  for (const Entry& e : kUnits) {
    if (u == e.name) {
      *mult = e.mult;
      return true;
    }
  }
  return false;
}

}  // namespace

StatusOr<uint64_t> ParseByteSize(std::string_view text) {
  auto bad = [&](const char* why) {
    return Status::InvalidArgument("'" + std::string(text) + "' is not a byte size (" + why +
                                   "); expected a number with an optional unit, e.g. 20GiB, "
                                   "512MiB, 1.5TB or 4096");
  };
  std::string s(text);
  size_t begin = s.find_first_not_of(" \t");
  size_t end = s.find_last_not_of(" \t");
  if (begin == std::string::npos) return bad("empty");
  s = s.substr(begin, end - begin + 1);
  if (s[0] == '-') return bad("negative");
  const char* start = s.c_str();
  char* stop = nullptr;
  double number = std::strtod(start, &stop);
  if (stop == start) return bad("no number");
  if (!std::isfinite(number)) return bad("not finite");
  std::string_view unit(stop, s.size() - size_t(stop - start));  // to the end: a NUL byte is not it
  while (!unit.empty() && (unit.front() == ' ' || unit.front() == '\t')) unit.remove_prefix(1);
  double mult = 0;
  if (!UnitMultiplier(unit, &mult)) return bad("unknown unit");
  double bytes = number * mult;
  if (bytes < 0) return bad("negative");
  if (bytes >= 1.8e19) return bad("too large");
  return static_cast<uint64_t>(std::round(bytes));  // not llround: its long long ends at 2^63
}

std::string FormatBytes(double bytes) {
  static const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int unit = 0;
  double v = bytes;
  while (std::fabs(v) >= 1024.0 && unit < 5) {
    v /= 1024.0;
    ++unit;
  }
  char buf[32];
  if (unit == 0) {
    std::snprintf(buf, sizeof buf, "%.0f B", v);
  } else if (std::fabs(v) >= 100) {
    std::snprintf(buf, sizeof buf, "%.0f %s", v, kNames[unit]);
  } else if (std::fabs(v) >= 10) {
    std::snprintf(buf, sizeof buf, "%.1f %s", v, kNames[unit]);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f %s", v, kNames[unit]);
  }
  return buf;
}

std::string FormatBytes(uint64_t bytes) { return FormatBytes(static_cast<double>(bytes)); }

}  // namespace tencache
