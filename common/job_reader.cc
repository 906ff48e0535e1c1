#include "common/job_reader.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "common/byte_size.h"

namespace tencache {

std::string JoinNames(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

YAML::Node JobReader::Find(const std::string& key) const {
  // yaml-cpp's Node::operator= writes through to the referenced node and a
  // non-const operator[] inserts: walk with reset() and const lookups only.
  YAML::Node node;
  node.reset(root_);
  std::stringstream parts(key);
  std::string part;
  while (std::getline(parts, part, '.')) {
    if (!node.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    const YAML::Node& current = node;
    YAML::Node child = current[part];
    if (!child.IsDefined() || child.IsNull()) return YAML::Node(YAML::NodeType::Undefined);
    node.reset(child);
  }
  return node;
}

std::string JobReader::Location(const std::string& key, const YAML::Node& node) const {
  auto it = overridden_.find(key);
  if (it != overridden_.end()) return it->second;
  const YAML::Mark mark = node.Mark();
  if (mark.line < 0) return source_;
  return source_ + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

Status JobReader::Error(const std::string& key, const YAML::Node& node,
                        const std::string& expected) const {
  std::string got;
  if (node.IsScalar()) got = ", got '" + Excerpt(node.Scalar()) + "'";
  else if (node.IsSequence()) got = ", got a list";
  else if (node.IsMap()) got = ", got a mapping";
  return Status::InvalidArgument(Location(key, node) + ": key '" + key + "': expected " + expected + got);
}

Status JobReader::Scalar(const std::string& key, const YAML::Node& node, const std::string& expected,
                         std::string* text) const {
  if (!node.IsScalar()) return Error(key, node, expected);
  *text = node.Scalar();
  return Status::Ok();
}

Status JobReader::GetString(const std::string& key, std::string* out) {
  YAML::Node node = Find(key);
  if (!node.IsDefined()) return Status::Ok();
  TC_RETURN_IF_ERROR(Scalar(key, node, "a string", out));
  if (out->empty()) return Error(key, node, "a non-empty string");
  Record(key, node);
  return Status::Ok();
}

namespace {

enum class WholeNumber { kOk, kNotInteger, kTooLarge };

// An integer written plainly (-12, 4096) or in exponent form when integral
// (2e9, 1.5e3), read exactly in integer arithmetic: never rounded through a
// double. kNotInteger for anything else (1.5, 1e-3, 0x10, "", "inf");
// kTooLarge when its magnitude exceeds 2^64 - 1.
WholeNumber ParseWholeNumber(const std::string& text, bool* negative, uint64_t* magnitude) {
  size_t i = 0;
  *negative = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) *negative = text[i++] == '-';
  std::string digits;  // the integer and fraction digits, without the point
  int64_t exponent = 0;  // value = digits x 10^exponent
  bool any = false;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, any = true) digits += text[i];
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, any = true) {
      digits += text[i];
      --exponent;
    }
  }
  if (!any) return WholeNumber::kNotInteger;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool exp_negative = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) exp_negative = text[i++] == '-';
    int64_t e = 0;
    bool exp_any = false;
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, exp_any = true) {
      e = std::min<int64_t>(e * 10 + (text[i] - '0'), 1'000'000);  // far past any 64-bit magnitude
    }
    if (!exp_any) return WholeNumber::kNotInteger;
    exponent += exp_negative ? -e : e;
  }
  if (i != text.size()) return WholeNumber::kNotInteger;  // also a NUL byte inside the text
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size()));
  *magnitude = 0;
  if (digits.empty()) return WholeNumber::kOk;  // zero, in any form
  for (; exponent < 0; ++exponent) {  // a fraction: only trailing zeros may go
    if (digits.back() != '0') return WholeNumber::kNotInteger;
    digits.pop_back();
  }
  constexpr uint64_t kMax = UINT64_MAX;
  uint64_t v = 0;
  for (char c : digits) {
    const uint64_t d = uint64_t(c - '0');
    if (v > (kMax - d) / 10) return WholeNumber::kTooLarge;
    v = v * 10 + d;
  }
  for (; exponent > 0; --exponent) {
    if (v > kMax / 10) return WholeNumber::kTooLarge;
    v *= 10;
  }
  *magnitude = v;
  return WholeNumber::kOk;
}

}  // namespace

Status JobReader::GetWhole(const std::string& key, int64_t min, uint64_t max, bool* negative, uint64_t* magnitude,
                           bool* found) {
  YAML::Node node = Find(key);
  *found = node.IsDefined();
  if (!*found) return Status::Ok();
  const bool open_ended = max >= uint64_t(INT32_MAX);
  const std::string expected = open_ended ? "an integer >= " + std::to_string(min)
                                          : "an integer from " + std::to_string(min) + " to " + std::to_string(max);
  const std::string too_large = open_ended ? expected + " and at most " + std::to_string(max) : expected;
  std::string text;
  TC_RETURN_IF_ERROR(Scalar(key, node, expected, &text));
  const WholeNumber parsed = ParseWholeNumber(text, negative, magnitude);
  if (parsed == WholeNumber::kNotInteger) return Error(key, node, expected);
  if (parsed == WholeNumber::kTooLarge) return Error(key, node, *negative ? expected : too_large);
  if (*magnitude == 0) *negative = false;
  // -magnitude >= min, for a negative min: magnitude <= -(min + 1) + 1 without overflow.
  const bool below = *negative ? min >= 0 || *magnitude - 1 > uint64_t(-(min + 1))
                               : min > 0 && *magnitude < uint64_t(min);
  if (below) return Error(key, node, expected);
  if (!*negative && *magnitude > max) return Error(key, node, too_large);
  Record(key, node);
  return Status::Ok();
}

Status JobReader::GetInt(const std::string& key, int64_t min, int* out, int64_t max) {
  bool negative = false, found = false;
  uint64_t magnitude = 0;
  const int64_t top = std::min<int64_t>(max, INT32_MAX);
  TC_RETURN_IF_ERROR(GetWhole(key, std::max<int64_t>(min, INT32_MIN), uint64_t(std::max<int64_t>(top, 0)),
                              &negative, &magnitude, &found));
  if (found) *out = negative ? int(-int64_t(magnitude)) : int(magnitude);
  return Status::Ok();
}

Status JobReader::GetCountOrAuto(const std::string& key, int* out, int max) {
  YAML::Node node = Find(key);
  if (node.IsDefined() && node.IsScalar() && node.Scalar() == "auto") {
    *out = 0;
    Record(key, node);
    return Status::Ok();
  }
  const std::string expected =
      "'auto' or an integer " + (max == 2147483647 ? std::string(">= 1") : "from 1 to " + std::to_string(max));
  if (node.IsDefined() && !node.IsScalar()) return Error(key, node, expected);
  Status s = GetInt(key, 1, out, max);
  if (!s.ok()) return Error(key, node, expected);
  return s;
}

Status JobReader::GetIntOrAuto(const std::string& key, int min, int auto_value, int* out) {
  YAML::Node node = Find(key);
  if (node.IsDefined() && node.IsScalar() && node.Scalar() == "auto") {
    *out = auto_value;
    Record(key, node);
    return Status::Ok();
  }
  const std::string expected = "'auto' or an integer >= " + std::to_string(min);
  if (node.IsDefined() && !node.IsScalar()) return Error(key, node, expected);
  Status s = GetInt(key, min, out);
  if (!s.ok()) return Error(key, node, expected);
  return s;
}

Status JobReader::GetUint64(const std::string& key, uint64_t min, uint64_t* out) {
  bool negative = false, found = false;
  uint64_t magnitude = 0;
  TC_RETURN_IF_ERROR(GetWhole(key, int64_t(std::min<uint64_t>(min, INT64_MAX)), UINT64_MAX, &negative, &magnitude,
                              &found));
  if (found) *out = magnitude;
  return Status::Ok();
}

Status JobReader::GetDouble(const std::string& key, double min, bool min_exclusive, double* out) {
  YAML::Node node = Find(key);
  if (!node.IsDefined()) return Status::Ok();
  std::ostringstream expected;
  expected << "a number " << (min_exclusive ? "> " : ">= ") << min;
  std::string text;
  TC_RETURN_IF_ERROR(Scalar(key, node, expected.str(), &text));
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  bool bad = text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) ||
             (min_exclusive ? v <= min : v < min);
  if (bad) return Error(key, node, expected.str());
  *out = v;
  Record(key, node);
  return Status::Ok();
}

Status JobReader::GetDoubleBelow(const std::string& key, double min, bool min_exclusive, double max, double* out) {
  YAML::Node node = Find(key);
  if (!node.IsDefined()) return Status::Ok();
  std::ostringstream expected;
  expected << "a number " << (min_exclusive ? "> " : ">= ") << min << " and < " << max;
  double v = 0;
  if (!GetDouble(key, min, min_exclusive, &v).ok() || v >= max) return Error(key, node, expected.str());
  *out = v;
  return Status::Ok();
}

Status JobReader::GetBool(const std::string& key, bool* out) {
  YAML::Node node = Find(key);
  if (!node.IsDefined()) return Status::Ok();
  std::string text;
  TC_RETURN_IF_ERROR(Scalar(key, node, "true or false", &text));
  if (text == "true" || text == "yes") *out = true;
  else if (text == "false" || text == "no") *out = false;
  else return Error(key, node, "true or false");
  Record(key, node);
  return Status::Ok();
}

Status JobReader::GetSize(const std::string& key, bool allow_auto, std::optional<uint64_t>* out, bool allow_zero) {
  YAML::Node node = Find(key);
  if (!node.IsDefined()) return Status::Ok();
  const std::string expected = std::string(allow_auto ? "'auto' or " : "") +
                               (allow_zero ? "a size such as 0, 20GiB, 512MiB or 1.5TB"
                                           : "a positive size such as 20GiB, 512MiB or 1.5TB");
  std::string text;
  TC_RETURN_IF_ERROR(Scalar(key, node, expected, &text));
  Record(key, node);
  if (allow_auto && text == "auto") {
    out->reset();
    return Status::Ok();
  }
  StatusOr<uint64_t> bytes = ParseByteSize(text);
  if (!bytes.ok() || (*bytes == 0 && !allow_zero)) return Error(key, node, expected);
  *out = *bytes;
  size_texts_[key] = text;
  return Status::Ok();
}

Status JobReader::GetStringList(const std::string& key, std::vector<std::string>* out) {
  YAML::Node node = Find(key);
  if (!node.IsDefined()) return Status::Ok();
  const std::string expected = "a list of names such as [p4d.24xlarge, g5.12xlarge]";
  if (!node.IsSequence()) return Error(key, node, expected);
  out->clear();
  for (const YAML::Node& item : node) {
    if (!item.IsScalar() || item.Scalar().empty()) return Error(key, item, expected);
    if (std::find(out->begin(), out->end(), item.Scalar()) != out->end()) {
      return Status::InvalidArgument(Location(key, item) + ": key '" + key + "': '" + Excerpt(item.Scalar()) +
                                     "' is listed twice; expected each name once");
    }
    out->push_back(item.Scalar());
  }
  Record(key, node);
  return Status::Ok();
}

}  // namespace tencache
