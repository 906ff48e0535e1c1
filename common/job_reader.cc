#include "common/job_reader.h"

#include <algorithm>
#include <cmath>
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

// Integers may be written plainly or in exponent form when integral (2e9).
static bool ParseWholeNumber(const std::string& text, double* value) {
  if (text.empty()) return false;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  // To the text's end, not to a NUL byte inside it, where strtod stops.
  if (end != text.c_str() + text.size() || !std::isfinite(v) || v != std::floor(v)) return false;
  *value = v;
  return true;
}

// A whole number in [min, max] at `key`; *found false when the key is absent.
Status JobReader::GetWhole(const std::string& key, double min, double max, double* out, bool* found) {
  YAML::Node node = Find(key);
  *found = node.IsDefined();
  if (!*found) return Status::Ok();
  const std::string expected = max >= 2147483647.0 ? "an integer >= " + std::to_string(int64_t(min))
                                                    : "an integer from " + std::to_string(int64_t(min)) + " to " +
                                                          std::to_string(int64_t(max));
  std::string text;
  TC_RETURN_IF_ERROR(Scalar(key, node, expected, &text));
  if (!ParseWholeNumber(text, out) || *out < min) return Error(key, node, expected);
  if (*out > max) {
    return Error(key, node, max >= 2147483647.0 ? expected + " and at most " + std::to_string(int64_t(max)) : expected);
  }
  Record(key, node);
  return Status::Ok();
}

Status JobReader::GetInt(const std::string& key, int64_t min, int* out, int64_t max) {
  double v = 0;
  bool found = false;
  TC_RETURN_IF_ERROR(GetWhole(key, double(min), double(std::min<int64_t>(max, 2147483647)), &v, &found));
  if (found) *out = static_cast<int>(v);
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

Status JobReader::GetUint64(const std::string& key, uint64_t min, uint64_t* out) {
  double v = 0;
  bool found = false;
  TC_RETURN_IF_ERROR(GetWhole(key, double(min), 1.8e19, &v, &found));
  if (found) *out = static_cast<uint64_t>(v);
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
