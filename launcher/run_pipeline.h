// RunPipeline: `tencache-launch run`, the same six steps for every target:
// plan, resolve, write the run folder, start, follow, report. A Runner is what
// differs between targets: this machine or cluster.hosts under Open MPI
// (launcher/launch_run.h, MakeMpirunRunner) and a Kubeflow MPIJob on
// Kubernetes (launcher/launch_k8s.h, MakeMpiJobRunner). Every file the
// pipeline puts in the run folder goes through RunFolder
// (launcher/run_folder.h), whose errors name the file; the report is
// launcher/report_writer.h's.
// Single-threaded; one pipeline per process (a runner installs SIGINT /
// SIGTERM handlers while it follows).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/job_spec.h"
#include "common/status.h"
#include "launcher/catalog.h"
#include "launcher/local_runner.h"
#include "launcher/planner.h"
#include "launcher/resolved_job.h"
#include "launcher/run_folder.h"

namespace tencache {

// What a Runner planned: the job and the candidate that runs it. Valid while
// the Runner that made it lives (the plan points into what the runner holds).
struct PlannedRun {
  std::string out;                 // the run folder
  JobSpec job;                     // as loaded, with the run's defaults filled in
  const Catalog* catalog = nullptr;  // the runner's; the plan's candidates point into it
  PlanResult plan;
  int chosen = -1;                 // index into plan.candidates; -1: no instance type is feasible
  bool local = false;              // the candidate is plan.local (this machine), not plan.candidates[chosen]
  nlohmann::ordered_json machine;  // machine.json: where it runs
  std::vector<std::string> notes;  // the prediction's assumptions, for the report
  // REQUIRES: local or chosen >= 0.
  const Candidate& candidate() const { return local ? *plan.local : plan.candidates[plan.chosen]; }
};

// What the run folder holds before the run starts, in writing order.
using RunFiles = std::vector<std::pair<std::string, std::string>>;  // name, text

// What a Runner prepared for the attempt after a failed one.
struct RestartPlan {
  int64_t step = 0;        // the step the next attempt begins at (0: afresh)
  std::string replanned;   // "" or what changed: the hosts left out and the world the job was planned again for
};

// One target's part of each step. The pipeline calls, in order: Plan; then
// (when the candidate is feasible) Prepare; then DryRun and nothing more for a
// dry run; else Start, Follow (and, for each restart cluster.max_restarts
// allows, ExplainEnd, PrepareRestart, Start, Follow again), RunFields,
// Predicted (when a step ran), ExplainEnd. A Runner
// keeps what it needs between calls; it is used for one run.
class Runner {
 public:
  virtual ~Runner() = default;
  // Loads and checks the job, measures what the target needs measured, plans.
  // Errors: bad input (InvalidArgument / NotFound naming the key, file or
  // flag), the target unreachable (Unavailable), a probe that failed.
  virtual StatusOr<PlannedRun> Plan() = 0;
  // The run folder's files (job.resolved.yaml, plan.json, machine.json and
  // the target's own) for `resolved`, after the checks that must pass before
  // anything is written (disk space).
  virtual StatusOr<RunFiles> Prepare(const PlannedRun& run, const ResolvedJob& resolved) = 0;
  // What --dry-run prints after the plan: what would be written and started.
  virtual std::string DryRun(const PlannedRun& run, const RunFiles& files) = 0;
  // Starts the job from the written run folder; says where on stdout.
  virtual Status Start(const PlannedRun& run) = 0;
  // Follows the job to its end: logs/ and metrics.jsonl in the run folder. A
  // Status only when it cannot be followed at all; a failed or interrupted
  // run is an outcome.
  virtual StatusOr<RunOutcome> Follow(const PlannedRun& run) = 0;
  // The candidate the report measures the run against.
  virtual Candidate Predicted(const PlannedRun& run, const ResolvedJob& resolved) = 0;
  // Managed recovery (cluster.max_restarts), after Follow returned the failed
  // outcome `failed`: makes the next Start / Follow resume from the newest
  // complete checkpoint, or start afresh when there is none. Where the
  // capacity changed (a host that no longer answers) it plans the job again
  // for what is left and updates `run`, `resolved` and the run folder's files.
  // FailedPrecondition when the job cannot be started again (no capacity
  // left, the rest cannot run it): the run ends there with that cause; another
  // Status when the failed attempt cannot be cleared away (a Kubernetes MPIJob
  // that is not deleted in time).
  virtual StatusOr<RestartPlan> PrepareRestart(PlannedRun* run, ResolvedJob* resolved, const RunOutcome& failed) = 0;
  // run.json's fields of this target, added to the ones every run has.
  virtual void RunFields(const PlannedRun& run, const RunOutcome& outcome, nlohmann::ordered_json* run_json) = 0;
  // On stderr: why an interrupted or failed run ended and what to do next
  // (nothing for a finished one).
  virtual void ExplainEnd(const PlannedRun& run, const RunOutcome& outcome) = 0;
};

// "finished", "interrupted" or "failed", and the exit code (launcher/exit_code.h).
std::string RunStatus(const RunOutcome& outcome);
int RunExitCode(const RunOutcome& outcome);
// Who failed: "rank R" (or "a rank" where unknown), with " on HOST" where the
// host is known and the failure does not name it already.
std::string WhoFailed(const RunOutcome& outcome);

// Runs the six steps with `runner`; returns the process exit code
// (launcher/exit_code.h): 0 finished (or a dry run), 1 failed or no report
// could be made, 2 bad input, 3 no feasible instance type, 130 interrupted.
// A failed run is started again from its newest checkpoint up to
// cluster.max_restarts times (launcher/run_recovery.h). The run folder: what
// Prepare returned, run.json (status, target, exit_code, steps_done,
// failed_rank, failed_host, failure, last_stderr, stop_seconds, stop_forced,
// rank_hosts, of the last attempt; restarts and attempts; the runner's
// RunFields) and, when a step ran, the report (launcher/report_writer.h's
// WriteReport).
int RunPipeline(Runner& runner, const std::string& job_path, bool dry_run);

}  // namespace tencache
