// Per-node figures of a run: each rank's step time, stall and traffic (the
// metrics lines' "per_rank" columns) grouped by the host the rank ran on, as
// report.json's "nodes" holds them and report.md's per-node table shows them.
// Pure functions.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/job_spec.h"
#include "common/stats.h"

namespace tencache {

// A number field of a metrics object (0 where absent or not a number): shared
// with the run report's summary (which takes medians with common/stats.h).
double NumberField(const nlohmann::json& j, const char* key);

// The host of each rank: `reported` (the ranks' own PID lines) where given;
// otherwise cluster.hosts filled in order, slot by slot (Open MPI's default
// mapping), or `this_host` for every rank of a local run; a Kubernetes
// run's ranks only where reported.
std::map<int, std::string> RankHosts(const JobSpec& job, const std::map<int, std::string>& reported,
                                     const std::string& this_host);

// {"0": "host", ...} as run.json keeps it, and back (entries that are not a
// rank number with a string are left out).
nlohmann::ordered_json RankHostsToJson(const std::map<int, std::string>& hosts);
std::map<int, std::string> RankHostsFromJson(const nlohmann::json& j);

// One entry per host, in first-rank order: {"host", "ranks": [..],
// "step_time_s" (the slowest of its ranks), "stall_s" and "bytes_h2d",
// "bytes_d2h", "bytes_nvme_read", "bytes_nvme_write" (summed over its ranks),
// each the median over the steps from `warmup` on; "peak_host_bytes" and
// "peak_nvme_bytes" (the largest of its ranks over all steps)}. Empty when
// the metrics carry no per-rank columns (a worker older than this report).
nlohmann::ordered_json NodeFigures(const std::vector<nlohmann::json>& metrics, const std::map<int, std::string>& hosts,
                                   int warmup);

// The per-node table's rows (a header row first) from NodeFigures' output;
// empty when `nodes` is not a non-empty array of such objects.
std::vector<std::vector<std::string>> NodeRows(const nlohmann::json& nodes);

}  // namespace tencache
