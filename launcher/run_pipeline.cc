#include "launcher/run_pipeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "common/clock.h"
#include "launcher/exit_code.h"
#include "launcher/report_writer.h"
#include "launcher/report_nodes.h"
#include "launcher/run_recovery.h"

namespace tencache {

namespace fs = std::filesystem;

std::string RunStatus(const RunOutcome& o) {
  return o.exit_code == 0 ? "finished" : o.interrupted ? "interrupted" : "failed";
}

std::string WhoFailed(const RunOutcome& o) {
  std::string who = o.failed_rank >= 0 ? "rank " + std::to_string(o.failed_rank) : "a rank";
  if (!o.failed_host.empty() && o.failure.find(o.failed_host) == std::string::npos) who += " on " + o.failed_host;
  return who;
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

// The price of the run's nodes per hour (0: unknown).
double RunPricePerHour(const PlannedRun& run) {
  const Candidate& c = run.candidate();
  return c.price_per_node_hour * std::max(1, c.nodes);
}

// UTC now, ISO 8601.
std::string UtcNow() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// Starts and follows the job, and starts it again after a failure while
// cluster.max_restarts allows (launcher/run_recovery.h): the last attempt's
// outcome; every attempt in *attempts. A restart may plan the job again for
// the capacity left (*run, *resolved).
StatusOr<RunOutcome> FollowAttempts(Runner& runner, PlannedRun* planned, ResolvedJob* resolved,
                                    const RunFolder& folder, std::vector<RunAttempt>* attempts) {
  const PlannedRun& run = *planned;
  const ClusterSpec cluster = run.job.cluster;  // max_restarts and the backoff, as the run began
  for (;;) {
    TC_RETURN_IF_ERROR(runner.Start(run));
    RunAttempt a;
    a.number = int(attempts->size()) + 1;
    a.started_at = UtcNow();
    a.started_s = MonotonicSeconds();
    TC_ASSIGN_OR_RETURN(a.outcome, runner.Follow(run));
    a.ended_s = MonotonicSeconds();
    if (!attempts->empty() && attempts->back().restarted && a.outcome.first_step_s >= 0) {
      attempts->back().recover_s = a.outcome.first_step_s - attempts->back().ended_s;
    }
    attempts->push_back(a);
    const RunOutcome& o = attempts->back().outcome;
    if (o.exit_code == 0 || o.interrupted) return o;
    const int restarts = int(attempts->size()) - 1;
    if (restarts >= cluster.max_restarts) return o;
    if (FailedTheSameWayTwice(*attempts)) {
      std::fprintf(stderr, "tencache-launch: attempt %d failed the same way as attempt %d (%s, after %d step(s)): "
                           "not restarting again\n",
                   a.number, a.number - 1, AttemptCause(o).c_str(), o.steps_done);
      return o;
    }
    runner.ExplainEnd(run, o);
    StatusOr<RestartPlan> next = runner.PrepareRestart(planned, resolved, o);
    if (next.status().code() == StatusCode::kFailedPrecondition) {
      std::fprintf(stderr, "tencache-launch: not restarting: %s\n", next.status().message().c_str());
      return o;
    }
    TC_RETURN_IF_ERROR(next.status());
    const int64_t begin_step = next->step;
    if (!next->replanned.empty()) std::fprintf(stderr, "tencache-launch: planned again %s\n", next->replanned.c_str());
    const double wait_s = cluster.restart_backoff_s * std::pow(2.0, restarts);
    std::fprintf(stderr, "tencache-launch: restart %d of %d in %.0f s, %s\n", restarts + 1, cluster.max_restarts,
                 wait_s,
                 begin_step > 0 ? ("from the checkpoint at step " + std::to_string(begin_step)).c_str()
                                : "from the start (no complete checkpoint)");
    std::fflush(stderr);
    if (!WaitBeforeRestart(wait_s)) {  // stopped while waiting: the failed attempt's results stay as they are
      RunOutcome stopped = o;
      stopped.interrupted = true;
      return stopped;
    }
    RunAttempt& failed = attempts->back();
    TC_RETURN_IF_ERROR(TrimMetrics(folder.Path("metrics.jsonl"), begin_step, &failed.steps_lost, &failed.lost_step_s));
    TC_RETURN_IF_ERROR(KeepAttemptLogs(folder, failed.number));
    failed.restarted = true;
    failed.resumed_at = begin_step;
    failed.replanned = next->replanned;
    std::fprintf(stderr, "tencache-launch: restarting: %lld step(s) lost (run again); the failed attempt's logs are "
                         "in %s\n",
                 (long long)failed.steps_lost, folder.Path("logs.attempt-" + std::to_string(failed.number)).c_str());
    std::fflush(stderr);
  }
}

// run.json: how the run ended.
Status WriteRunRecord(Runner& runner, const RunFolder& folder, const PlannedRun& run, const RunOutcome& o,
                      const nlohmann::ordered_json& attempts) {
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
                              {"rank_hosts", RankHostsToJson(o.rank_hosts)},
                              {"restarts", std::max(0, int(attempts.size()) - 1)},
                              {"attempts", attempts}};
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
  std::vector<RunAttempt> attempts;
  if (Status s = folder.Create(); !s.ok()) return FailCommand(s);
  for (const auto& [name, text] : *files) {
    if (Status s = folder.Write(name, text); !s.ok()) return FailCommand(s);
  }
  std::error_code ec;
  fs::remove(folder.Path("metrics.jsonl"), ec);  // an earlier run's, replaced by --overwrite
  StatusOr<RunOutcome> outcome = FollowAttempts(runner, &run, &resolved, folder, &attempts);
  if (!outcome.ok()) return FailCommand(outcome.status());
  // The run has ended: what can still be written and said, is.
  int code = kExitOk;
  const nlohmann::ordered_json attempts_json = AttemptsToJson(attempts, RunPricePerHour(run));
  if (Status s = WriteRunRecord(runner, folder, run, *outcome, attempts_json); !s.ok()) code = FailCommand(s);
  if (outcome->steps_done > 0) {
    const int reported = WriteReport(folder, resolved.job, *run.catalog, runner.Predicted(run, resolved),
                                     run.machine, RunStatus(*outcome), run.notes, outcome->rank_hosts, attempts_json);
    if (code == kExitOk) code = reported;
  }
  runner.ExplainEnd(run, *outcome);
  return outcome->exit_code != 0 ? RunExitCode(*outcome) : code;
}

}  // namespace tencache
