// BenchFlags: the tiny "--name value" / "--name=value" / "--switch" parser shared
// by tencache-bench's subcommands. Every flag is declared with its expected form,
// so an unknown flag or a bad value produces an InvalidArgument that names the
// flag and what was expected (the program turns it into exit code 2).
// Not thread-safe; used once at startup.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace tencache::bench {

class BenchFlags {
 public:
  explicit BenchFlags(std::string command) : command_(std::move(command)) {}

  // Declares a flag taking a value ("--dir DIR") or a switch ("--json").
  void Value(const std::string& name, const std::string& form, const std::string& default_value);
  void Switch(const std::string& name);

  Status Parse(const std::vector<std::string>& args);

  const std::string& Get(const std::string& name) const { return values_.at(name); }
  bool On(const std::string& name) const { return switches_.at(name); }
  StatusOr<uint64_t> Bytes(const std::string& name) const;
  // A positive integer no larger than `max`.
  StatusOr<uint64_t> Count(const std::string& name, uint64_t max) const;
  std::string Usage() const;

 private:
  std::string command_;
  std::map<std::string, std::string> forms_;
  std::map<std::string, std::string> values_;
  std::map<std::string, bool> switches_;
};

}  // namespace tencache::bench
