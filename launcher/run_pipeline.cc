#include "launcher/run_pipeline.h"

#include <cstdio>
#include <filesystem>

#include "launcher/exit_code.h"
#include "launcher/report_writer.h"
#include "launcher/report_nodes.h"

namespace tencache {

namespace fs = std::filesystem;

std::string RunStatus(const RunOutcome& o) {
  return o.exit_code == 0 ? "finished" : o.interrupted ? "interrupted" : "failed";
}

int RunExitCode(const RunOutcome& o) {
  return o.interrupted ? kExitInterrupted : o.exit_code != 0 ? kExitFailed : kExitOk;
}

namespace {

// Plan and resolve: the resolved job, or the exit code after saying why.
int PlanAndResolve(Runner& runner, const std::string& job_path, PlannedRun* run, ResolvedJob* resolved) {
  StatusOr<PlannedRun> planned = runner.Plan();
  if (!planned.ok()) return FailCommand(planned.status());
  *run = std::move(*planned);
  if (!run->local && run->chosen < 0) return FailNoFeasiblePlan(job_path);
  std::printf("%s\n", RenderPlanTable(run->plan, false).c_str());
  if (!run->candidate().feasible) {
    return FailCommand(Status::InvalidArgument(job_path + ": this machine cannot run the job: " +
                                               run->candidate().reason +
                                               "; change the budgets, micro_batch or model (or --set them)"));
  }
  StatusOr<ResolvedJob> r = ResolveJob(run->job, run->candidate());
  if (!r.ok()) return FailCommand(r.status());
  *resolved = std::move(*r);
  return kExitOk;
}

// run.json: how the run ended.
Status WriteRunRecord(Runner& runner, const RunFolder& folder, const PlannedRun& run, const RunOutcome& o) {
  nlohmann::ordered_json j = {{"status", RunStatus(o)},
                              {"target", TargetName(run.job.cluster.target)},
                              {"exit_code", RunExitCode(o)},
                              {"steps_done", o.steps_done},
                              {"failed_rank", o.failed_rank},
                              {"failure", o.failure},
                              {"failed_host", o.failed_host},
                              {"last_stderr", o.last_stderr},
                              {"stop_seconds", o.stop_seconds},
                              {"stop_forced", o.forced},
                              {"rank_hosts", RankHostsToJson(o.rank_hosts)}};
  runner.RunFields(run, o, &j);
  return folder.Write("run.json", j.dump(2) + "\n");
}

}  // namespace

int RunPipeline(Runner& runner, const std::string& job_path, bool dry_run) {
  PlannedRun run;
  ResolvedJob resolved;
  if (int code = PlanAndResolve(runner, job_path, &run, &resolved); code != kExitOk) return code;
  StatusOr<RunFiles> files = runner.Prepare(run, resolved);
  if (!files.ok()) return FailCommand(files.status());
  if (dry_run) {
    std::printf("%s", runner.DryRun(run, *files).c_str());
    return kExitOk;
  }

  const RunFolder folder(run.out);
  if (Status s = folder.Create(); !s.ok()) return FailCommand(s);
  for (const auto& [name, text] : *files) {
    if (Status s = folder.Write(name, text); !s.ok()) return FailCommand(s);
  }
  std::error_code ec;
  fs::remove(folder.Path("metrics.jsonl"), ec);  // an earlier run's, replaced by --overwrite
  if (Status s = runner.Start(run); !s.ok()) return FailCommand(s);

  StatusOr<RunOutcome> outcome = runner.Follow(run);
  if (!outcome.ok()) return FailCommand(outcome.status());
  // The run has ended: what can still be written and said, is.
  int code = kExitOk;
  if (Status s = WriteRunRecord(runner, folder, run, *outcome); !s.ok()) code = FailCommand(s);
  if (outcome->steps_done > 0) {
    const int reported = WriteReport(folder, resolved.job, *run.catalog, runner.Predicted(run, resolved),
                                     run.machine, RunStatus(*outcome), run.notes, outcome->rank_hosts);
    if (code == kExitOk) code = reported;
  }
  runner.ExplainEnd(run, *outcome);
  return outcome->exit_code != 0 ? RunExitCode(*outcome) : code;
}

}  // namespace tencache
