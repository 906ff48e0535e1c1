// JobReader: typed values read out of a job's YAML tree, each error naming the
// file (or "--set KEY"), line, column and key, and what was expected.
// Internal to job parsing (common/job_spec.cc); not a public interface.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/human_format.h"
#include "common/status.h"
#include "common/suggest.h"

namespace tencache {

// "a, b, c".
std::string JoinNames(const std::vector<std::string>& v);

// Reads typed values out of the YAML tree, naming file, line and key on error.
class JobReader {
 public:
  JobReader(std::string source, YAML::Node root, std::map<std::string, std::string> overridden)
      : source_(std::move(source)), root_(std::move(root)), overridden_(std::move(overridden)) {}

  // Every key under `section` ("" for the top level) is one of JobKeys()
  // (common/job_keys.h), and appears once (defined in job_spec.cc).
  Status CheckKeys(const YAML::Node& node, const std::string& section);
  YAML::Node Find(const std::string& key) const;
  std::string Location(const std::string& key, const YAML::Node& node) const;
  Status Error(const std::string& key, const YAML::Node& node, const std::string& expected) const;

  Status GetString(const std::string& key, std::string* out);
  // Integers are read exactly (never through a double), written plainly or in
  // exponent form when integral (2e9); 1.5, 1e-3 or a value out of range is an
  // error naming the key and the range.
  // An integer from `min` to `max` (at most 2^31 - 1).
  Status GetInt(const std::string& key, int64_t min, int* out, int64_t max = 2147483647);
  // An integer >= 1, or 'auto' (stored as 0).
  Status GetCountOrAuto(const std::string& key, int* out, int max = 2147483647);
  // An integer >= `min`, or 'auto' (stored as `auto_value`, below `min`).
  Status GetIntOrAuto(const std::string& key, int min, int auto_value, int* out);
  // An integer from `min` to 2^64 - 1.
  Status GetUint64(const std::string& key, uint64_t min, uint64_t* out);
  Status GetDouble(const std::string& key, double min, bool min_exclusive, double* out);
  // A number in [min, max) (`min` itself excluded when min_exclusive).
  Status GetDoubleBelow(const std::string& key, double min, bool min_exclusive, double max, double* out);
  Status GetBool(const std::string& key, bool* out);
  Status GetSize(const std::string& key, bool allow_auto, std::optional<uint64_t>* out, bool allow_zero = false);
  // A list of non-empty names, each named once.
  Status GetStringList(const std::string& key, std::vector<std::string>* out);
  template <typename E>
  Status GetEnum(const std::string& key, const std::vector<std::pair<std::string, E>>& values, E* out);

  bool Has(const std::string& key) const { return Find(key).IsDefined(); }
  const std::map<std::string, std::string>& locations() const { return locations_; }
  const std::map<std::string, std::string>& size_texts() const { return size_texts_; }

 private:
  // A whole number in [min, max] at `key`, as its sign and magnitude; *found
  // false when the key is absent.
  Status GetWhole(const std::string& key, int64_t min, uint64_t max, bool* negative, uint64_t* magnitude,
                  bool* found);
  Status Scalar(const std::string& key, const YAML::Node& node, const std::string& expected,
                std::string* text) const;
  void Record(const std::string& key, const YAML::Node& node) { locations_[key] = Location(key, node); }

  std::string source_;
  YAML::Node root_;
  std::map<std::string, std::string> overridden_;  // key -> "--set key=value"
  std::map<std::string, std::string> locations_;
  std::map<std::string, std::string> size_texts_;  // GetSize's keys -> the text as written
};

template <typename E>
Status JobReader::GetEnum(const std::string& key, const std::vector<std::pair<std::string, E>>& values,
                          E* out) {
  YAML::Node node = Find(key);
  if (!node.IsDefined()) return Status::Ok();
  std::vector<std::string> names;
  for (const auto& v : values) names.push_back(v.first);
  const std::string expected = "one of " + JoinNames(names);
  std::string text;
  TC_RETURN_IF_ERROR(Scalar(key, node, expected, &text));
  for (const auto& v : values) {
    if (v.first == text) {
      *out = v.second;
      Record(key, node);
      return Status::Ok();
    }
  }
  return Error(key, node, expected + DidYouMean(text, names));
}

}  // namespace tencache
