// WriteReport / RebuildReport: a run folder's report — report.json (the
// RunReport of launcher/report_json.h, built by launcher/run_report.h's
// BuildReport from the folder's metrics.jsonl and the plan's candidate), then
// report.md and the pictures rendered from it (launcher/report_render.h), and
// the summary on stdout. RunPipeline writes it when a run ends;
// `tencache-launch report RUN_DIR` rebuilds it from what the folder holds.
// Single-threaded.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/job_spec.h"
#include "launcher/catalog.h"
#include "launcher/planner.h"
#include "launcher/run_folder.h"

namespace tencache {

// Writes report.json from the folder's metrics.jsonl and `predicted` (the
// run's candidate, for `job` as resolved), renders report.md and the pictures,
// and prints the summary. `machine`: machine.json as the run wrote it;
// `status`: finished | interrupted | failed; `notes`: the prediction's
// assumptions; `rank_hosts`: the host each rank reported (RunOutcome), for the
// per-node figures; `attempts`: run.json's attempts (launcher/run_recovery.h;
// null: none recorded). Returns the exit code: 0, or 1 when no report could be made
// (no step measured, a file not written; said on stderr). A picture gnuplot
// could not draw is a warning while report.md stands.
int WriteReport(const RunFolder& folder, const JobSpec& job, const Catalog& catalog, const Candidate& predicted,
                const nlohmann::ordered_json& machine, const std::string& status,
                const std::vector<std::string>& notes, const std::map<int, std::string>& rank_hosts = {},
                const nlohmann::ordered_json& attempts = nullptr);

// Rebuilds the report of the run folder `dir` (finished or interrupted) from
// its job.resolved.yaml, machine.json, run.json and metrics.jsonl, with the
// catalog of `catalog_flag` ("": the job's cluster.catalog). The candidate is
// re-evaluated as the run's target planned it: this machine from its recorded
// facts and probes, cluster.hosts from the catalog's instance type, a
// Kubernetes run's instance type from the catalog. Exit codes as WriteReport's,
// and 2 when the folder is not a run folder or a file in it is unreadable
// (named on stderr).
int RebuildReport(const std::string& dir, const std::string& catalog_flag);

}  // namespace tencache
