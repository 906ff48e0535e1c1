#include "common/human_format.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>

namespace tencache {
namespace {

std::string Printf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Printf(const char* fmt, ...) {
  char buf[128];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  return buf;
}

double RoundTo(double v, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(v * scale) / scale;
}

// "2,572": whole units with thousands separators. REQUIRES: 0 <= v < 9e18.
std::string Thousands(double v) {
  std::string digits = std::to_string(std::llround(v));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// Two significant digits in fixed notation ("0.0041"). REQUIRES: v > 0.
std::string TwoSignificant(double v) {
  int exponent = static_cast<int>(std::floor(std::log10(v)));
  const double rounded = RoundTo(v, 1 - exponent);
  if (rounded >= std::pow(10.0, exponent + 1)) ++exponent;  // 0.000999 -> 0.0010
  return Printf("%.*f", std::max(0, 1 - exponent), rounded);
}

// Three significant digits of v in [0, 1000): "9.99", "12.3", "950"; sets
// *overflow when v rounds to 1000 (the caller moves to the next unit).
std::string ThreeSignificant(double v, bool* overflow) {
  *overflow = false;
  if (RoundTo(v, 2) < 10) return Printf("%.2f", v);
  if (RoundTo(v, 1) < 100) return Printf("%.1f", v);
  if (std::round(v) < 1000) return Printf("%.0f", v);
  *overflow = true;
  return "";
}

}  // namespace

std::string FormatUsd(double usd) {
  if (!std::isfinite(usd)) return "n/a";
  if (usd < 0) return "-" + FormatUsd(-usd);
  if (usd == 0) return "$0";
  const double cents = std::round(usd * 100);
  if (cents >= 100000) return usd < 9e18 ? "$" + Thousands(usd) : Printf("$%.0f", usd);
  // Below a cent: two significant digits, unless they round up to the cent.
  if (usd < 0.01 && RoundTo(usd, 1 - static_cast<int>(std::floor(std::log10(usd)))) < 0.01) {
    return "$" + TwoSignificant(usd);
  }
  return Printf("$%.2f", std::max(cents, 1.0) / 100);
}

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds)) return "n/a";
  if (seconds < 0) return "-" + FormatDuration(-seconds);
  if (seconds == 0) return "0 s";
  if (std::round(seconds * 1e6) < 1000) return Printf("%.0f us", seconds * 1e6);
  const double ms = seconds * 1e3;
  if (RoundTo(ms, 1) < 10) return Printf("%.1f ms", ms);
  if (std::round(ms) < 1000) return Printf("%.0f ms", ms);
  if (RoundTo(seconds, 2) < 10) return Printf("%.2f s", seconds);
  if (RoundTo(seconds, 1) < 60) return Printf("%.1f s", seconds);
  const long long whole_seconds = std::llround(seconds);
  if (whole_seconds < 3600) return Printf("%lld min %lld s", whole_seconds / 60, whole_seconds % 60);
  const long long minutes = std::llround(seconds / 60);
  if (minutes < 24 * 60) return Printf("%lld h %lld min", minutes / 60, minutes % 60);
  const double days = seconds / 86400;
  if (RoundTo(days, 1) < 100) return Printf("%.1f days", days);
  return Printf("%.0f days", days);
}

std::string FormatRate(double value, const std::string& unit) {
  if (!std::isfinite(value)) return "n/a";
  if (value < 0) return "-" + FormatRate(-value, unit);
  static const char* kSuffix[] = {"", "K", "M", "G", "T", "P"};
  int u = 0;
  while (value >= 1000 && u < 5) {
    value /= 1000;
    ++u;
  }
  bool overflow = false;
  std::string number = value == 0 ? "0" : ThreeSignificant(value, &overflow);
  if (overflow && u < 5) number = ThreeSignificant(value / 1000, &overflow), ++u;
  if (overflow) number = Printf("%.0f", value);  // beyond P: whole numbers
  number += kSuffix[u];
  return unit.empty() ? number : number + " " + unit;
}

std::string FormatPercent(double fraction) {
  if (!std::isfinite(fraction)) return "n/a";
  if (std::round(fraction * 1000) == 0) return "0.0 %";
  return Printf("%.1f %%", fraction * 100);
}

std::string FormatSignedPercent(double fraction) {
  if (!std::isfinite(fraction)) return "n/a";
  if (std::round(fraction * 1000) == 0) return "0.0 %";
  return Printf("%+.1f %%", fraction * 100);
}

std::string FormatTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) line += row[i] + std::string(width[i] - row[i].size() + 2, ' ');
    out += line.substr(0, line.find_last_not_of(' ') + 1) + "\n";
  }
  return out;
}

namespace {

// The length of the well-formed UTF-8 character at text[i] (2 to 4 bytes), or 0
// where the bytes there are not one (a stray or overlong byte, a surrogate).
size_t Utf8Length(const std::string& text, size_t i) {
  const auto at = [&](size_t k) { return k < text.size() ? (unsigned char)text[k] : 0u; };
  const unsigned c = at(i);
  size_t n = 0;
  unsigned lo = 0x80, hi = 0xbf;  // the second byte's range
  if (c >= 0xc2 && c <= 0xdf) n = 2;
  else if (c >= 0xe0 && c <= 0xef) n = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
  else if (c >= 0xf0 && c <= 0xf4) n = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
  else return 0;
  if (at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (at(i + k) < 0x80 || at(i + k) > 0xbf) return 0;
  }
  return n;
}

}  // namespace

std::string Excerpt(const std::string& text, size_t max) {
  std::string out;
  size_t i = 0;
  while (i < text.size() && i < max) {
    const unsigned char c = text[i];
    if (c >= 0x20 && c < 0x7f) {
      out += char(c);
      ++i;
      continue;
    }
    if (const size_t n = Utf8Length(text, i); n > 0) {
      if (i + n > max) break;  // never half a character
      out.append(text, i, n);
      i += n;
      continue;
    }
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
    ++i;
  }
  if (i < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

}  // namespace tencache
