// LaunchRun: `tencache-launch run` from a job file to a finished
// run folder, through RunPipeline (launcher/run_pipeline.h) with the runner of
// cluster.target: MakeMpirunRunner for local and hosts — this machine a
// candidate, measured (or read from the per-machine probe cache), the ranks
// under Open MPI — and MakeMpiJobRunner (launcher/launch_k8s.h) for k8s.
// Every file a local or hosts run leaves is in its folder:
//   job.resolved.yaml  what every worker reads
//   plan.txt, plan.json  the plan, this machine included
//   machine.json       this machine's facts and probes
//   logs/              rank-N.out / rank-N.err, mpirun.err
//   metrics.jsonl      rank 0's per-step metrics
//   run.json           how the run ended
//   report.json, report.md, *.png, plots/   the report (launcher/report_writer.h)
// Single-threaded; one launch per process.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/job_spec.h"
#include "common/status.h"
#include "launcher/run_pipeline.h"

namespace tencache {

struct LaunchOptions {
  std::string job_path;
  std::vector<std::string> overrides;  // --set KEY=VALUE
  std::string out;                     // "": runs/NAME-YYYYmmdd-HHMMSS
  int steps = -1;                      // --steps: train.steps for this run
  int max_restarts = -1;               // --max-restarts: cluster.max_restarts; -1: the job's
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

// The process exit code (launcher/exit_code.h): 0 when the run finished, 2
// for bad input (the message on stderr names the key or file), 1 when a rank
// failed, 3 when no instance type is feasible (k8s), 130 when interrupted.
int LaunchRun(const LaunchOptions& options);

// The runner of cluster.target local and hosts for `job` (loaded with
// `options`' overrides). `options` must outlive it.
std::unique_ptr<Runner> MakeMpirunRunner(const LaunchOptions& options, JobSpec job);

}  // namespace tencache
