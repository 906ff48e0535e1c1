#include "bench/bench_flags.h"

#include <algorithm>
#include <cctype>

#include "bench/benchmarks.h"
#include "common/byte_size.h"

namespace tencache::bench {

void BenchFlags::Value(const std::string& name, const std::string& form, const std::string& default_value) {
  forms_[name] = form;
  values_[name] = default_value;
}

void BenchFlags::Switch(const std::string& name) {
  forms_[name] = "";
  switches_[name] = false;
}

std::string BenchFlags::Usage() const {
  std::string u = "usage: tencache-bench " + command_;
  for (const auto& [name, form] : forms_) u += " [--" + name + (form.empty() ? "" : " " + form) + "]";
  return u;
}

Status BenchFlags::Parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg.rfind("--", 0) != 0)
      return Status::InvalidArgument("tencache-bench " + command_ + ": unexpected argument '" + arg +
                                     "'; expected flags. " + Usage());
    std::string name = arg.substr(2), value;
    const bool inline_value = name.find('=') != std::string::npos;
    if (inline_value) {
      value = name.substr(name.find('=') + 1);
      name = name.substr(0, name.find('='));
    }
    auto form = forms_.find(name);
    if (form == forms_.end())
      return Status::InvalidArgument("tencache-bench " + command_ + ": unknown flag --" + name + ". " + Usage());
    if (form->second.empty()) {
      if (inline_value) return Status::InvalidArgument("--" + name + " is a switch and takes no value");
      switches_[name] = true;
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= args.size())
        return Status::InvalidArgument("--" + name + " needs a value: --" + name + " " + form->second);
      value = args[++i];
    }
    values_[name] = value;
  }
  return Status::Ok();
}

StatusOr<uint64_t> BenchFlags::Bytes(const std::string& name) const {
  StatusOr<uint64_t> v = ParseByteSize(values_.at(name));
  if (!v.ok())
    return Status::InvalidArgument("--" + name + " '" + values_.at(name) + "': expected a size such as " +
                                   forms_.at(name) + " (" + v.status().message() + ")");
  if (*v == 0) return Status::InvalidArgument("--" + name + " must be greater than 0; expected " + forms_.at(name));
  return v;
}

StatusOr<uint64_t> BenchFlags::Count(const std::string& name, uint64_t max) const {
  const std::string& s = values_.at(name);
  bool digits = !s.empty();
  for (char c : s) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  const uint64_t v = digits && s.size() < 19 ? std::stoull(s) : 0;
  if (!digits || v == 0 || v > max)
    return Status::InvalidArgument("--" + name + " '" + s + "': expected a whole number from 1 to " +
                                   std::to_string(max));
  return v;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace tencache::bench
