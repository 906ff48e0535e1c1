// LaunchRun: `tencache-launch run` (and `report`) from a job file to a finished
// run folder: load, plan (with this machine as a candidate for cluster.target
// local), resolve every auto into OUT/job.resolved.yaml, run the ranks under
// Open MPI, and report measured against predicted cost. Every file a run
// leaves is in its folder:
//   job.resolved.yaml  what every worker reads
//   plan.txt, plan.json  the plan, this machine included
//   machine.json       this machine's facts and probes
//   logs/              rank-N.out / rank-N.err, mpirun.err
//   metrics.jsonl      rank 0's per-step metrics
//   run.json           how the run ended
//   report.json, report.md, *.png, plots/   the report
// Single-threaded; one launch per process.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace tencache {

struct LaunchOptions {
  std::string job_path;
  std::vector<std::string> overrides;  // --set KEY=VALUE
  std::string out;                     // "": runs/NAME-YYYYmmdd-HHMMSS
  int steps = -1;                      // --steps: train.steps for this run
  bool dry_run = false;                // print the resolved job and commands, start nothing
  bool reprobe = false;                // measure this machine again even when cached
  std::string catalog;                 // --catalog
  std::string worker;                  // tencache-worker; "": next to this program
  std::string mpirun = "mpirun";
  double progress_every_s = 5;         // between progress lines when stdout is not a terminal
  bool resume = false;                 // --resume: the workers continue from the newest checkpoint
  std::string resume_from;             // --resume RUN_DIR: that run's checkpoints
  bool overwrite = false;              // --overwrite: replace an earlier run's results in --out
  std::string target;                  // --target local|k8s: overrides cluster.target
  std::string kubectl = "kubectl";     // cluster.target k8s: the kubectl program,
  std::string context;                 //   its context ("": the current one)
  std::string namespace_;              //   and namespace ("": cluster.namespace)
};

// The process exit code: 0 when the run finished, 2 for bad input (the
// message on stderr names the key or file), 1 when a rank failed, 130 when
// interrupted.
int LaunchRun(const LaunchOptions& options);

// Prints "tencache-launch: MESSAGE" on stderr; returns the exit code for `s`.
int Fail(const Status& s);

// Writes DIR/report.json from DIR/metrics.jsonl and the plan, renders report.md
// and the pictures, and prints the summary. 0, or 1 when no report could be made.
// `rank_hosts`: the host each rank reported (RunOutcome), for per-node figures.
class Catalog;
struct Candidate;
struct JobSpec;
int WriteReport(const std::string& dir, const JobSpec& job, const Catalog& catalog, const Candidate& predicted,
                const nlohmann::ordered_json& machine, const std::string& status, const std::vector<std::string>& notes,
                const std::map<int, std::string>& rank_hosts = {});

// Rebuilds report.json, report.md and the pictures of the run in `dir`
// (finished or interrupted). Same exit codes.
int RebuildReport(const std::string& dir, const std::string& catalog);

}  // namespace tencache
