#include "launcher/probe_conditions.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>

#include "common/cli.h"
#include "common/human_format.h"

namespace tencache {
namespace {

std::string Fixed(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string UtcTime(int64_t t) {
  char buf[32];
  const std::time_t tt = std::time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

}  // namespace

nlohmann::ordered_json ProbeConditions::ToJson() const {
  return {{"at", at}, {"load1", load1}, {"cores", cores}, {"cpu_model", cpu_model}, {"build", build}};
}

ProbeConditions ProbeConditions::FromJson(const nlohmann::json& j) {
  ProbeConditions c;
  if (!j.is_object()) return c;
  auto number = [&](const char* key, double fallback) {
    auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<double>() : fallback;
  };
  auto text = [&](const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  c.at = int64_t(number("at", 0));
  c.load1 = number("load1", -1);
  c.cores = int(number("cores", 0));
  c.cpu_model = text("cpu_model");
  c.build = text("build");
  return c;
}

double ReadLoadAverage(const std::string& loadavg_file) {
  std::ifstream in(loadavg_file);
  double load = -1;
  if (!(in >> load) || !std::isfinite(load) || load < 0) return -1;
  return load;
}

std::string ReadCpuModel(const std::string& cpuinfo_file) {
  std::ifstream in(cpuinfo_file);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

std::string WorkerBuild(const std::string& worker_binary) {
  std::string out = std::string("tencache ") + TencacheVersion() + ", " + worker_binary;
  struct stat st{};
  if (::stat(worker_binary.c_str(), &st) != 0) return out + " (not found)";
  return out + " (" + std::to_string(uint64_t(st.st_size)) + " bytes, modified " + std::to_string(int64_t(st.st_mtime)) +
         ")";
}

std::string ReprobeReason(const ProbeConditions& then, const ProbeConditions& now) {
  if (then.at == 0 || then.load1 < 0 || then.cores == 0 || then.build.empty()) {
    return "the cached probe does not record the load, cores and build it ran under (written by an older tencache)";
  }
  if (then.cpu_model != now.cpu_model) {
    return "the CPU differs (probed on '" + then.cpu_model + "', now '" + now.cpu_model + "')";
  }
  if (then.cores != now.cores) {
    return "the cores differ (probed on " + std::to_string(then.cores) + ", now " + std::to_string(now.cores) + ")";
  }
  if (then.build != now.build) return "the build differs (probed by " + then.build + "; now " + now.build + ")";
  if (now.load1 >= 0) {
    const double per_core = std::fabs(now.load1 - then.load1) / std::max(1, now.cores);
    if (per_core > kReprobeLoadPerCore) {
      return "the load differs (1-minute load average " + Fixed(then.load1) + " at the probe, " + Fixed(now.load1) +
             " now, on " + std::to_string(now.cores) + " cores: " + Fixed(per_core) + " per core, beyond " +
             Fixed(kReprobeLoadPerCore) + ")";
    }
  }
  return "";
}

std::string DescribeProbeConditions(const ProbeConditions& then, const ProbeConditions& now) {
  std::string out = "probe taken ";
  if (then.at == 0) {
    out += "at a time not recorded";
  } else {
    const double age = double(now.at - then.at);
    out += (age < 1 ? std::string("at this launch") : FormatDuration(age) + " before this launch") + " (" +
           UtcTime(then.at) + ")";
  }
  out += then.load1 >= 0 ? " at load " + Fixed(then.load1) : std::string(" at a load not recorded");
  if (then.cores > 0) out += " on " + std::to_string(then.cores) + " cores";
  if (now.load1 >= 0) out += "; load now " + Fixed(now.load1);
  return out + " (re-probed when the load per core differs by more than " + Fixed(kReprobeLoadPerCore) +
         ", or the CPU or build does)";
}

}  // namespace tencache
