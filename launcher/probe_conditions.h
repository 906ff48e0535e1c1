// ProbeConditions: the state of this machine when its probes ran — when, its
// 1-minute load average, its cores and CPU model, the tencache build — kept
// with the cached probe (launcher/local_machine.h) so that a later launch can
// tell whether the figures still describe the machine. A probe taken while
// other work loaded the cores predicts slow steps on an idle machine (and the
// reverse): a cached probe is reused only while the load per core, the CPU and
// the build are those it ran under; ReprobeReason says which one differs.
// Pure functions, but for the Read* ones, which read /proc and stat a file.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace tencache {

// A cached probe is measured again when the 1-minute load average per core
// differs from the probe's by more than this (0.5: with 2 cores, a load of 2.4
// at the probe against 0.4 now).
constexpr double kReprobeLoadPerCore = 0.5;

struct ProbeConditions {
  int64_t at = 0;        // Unix seconds; 0: not recorded
  double load1 = -1;     // /proc/loadavg's 1-minute load average; < 0: not recorded
  int cores = 0;         // online cores; 0: not recorded
  std::string cpu_model; // /proc/cpuinfo's first "model name"
  std::string build;     // WorkerBuild of the worker that probed
  // Absent fields read back as "not recorded" (a cache written before these were kept).
  nlohmann::ordered_json ToJson() const;
  static ProbeConditions FromJson(const nlohmann::json& j);
};

// The 1-minute load average from `loadavg_file`; -1 when unreadable.
double ReadLoadAverage(const std::string& loadavg_file = "/proc/loadavg");
// The first "model name" of `cpuinfo_file`; "" when none.
std::string ReadCpuModel(const std::string& cpuinfo_file = "/proc/cpuinfo");
// "tencache VERSION, WORKER (SIZE bytes, modified UNIX_SECONDS)": a rebuilt
// worker, or another one, reads differently. Never fails (a missing file says so).
std::string WorkerBuild(const std::string& worker_binary);

// "" when a probe taken under `then` may stand for `now`; otherwise why it may
// not, naming both values: the CPU model, the cores, the build, or the load
// per core beyond kReprobeLoadPerCore. A field `then` did not record counts
// as differing.
std::string ReprobeReason(const ProbeConditions& then, const ProbeConditions& now);

// "probe taken 3 h 5 min before this launch (2026-12-06 01:23 UTC) at load
// 2.41 on 2 cores; load now 0.40": for the plan's notes and the report.
std::string DescribeProbeConditions(const ProbeConditions& then, const ProbeConditions& now);

}  // namespace tencache
