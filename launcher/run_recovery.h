// Managed recovery (cluster.max_restarts): what RunPipeline does between a
// failed attempt and the next one, and the record of every attempt that
// run.json and the report carry (docs/launcher.md, "Managed recovery").
// An attempt that ended in failure is followed by another when restarts are
// left and it did not fail the same way as the attempt before it; the next one
// resumes from the newest complete checkpoint (afresh where there is none),
// after the failed one's metrics past that checkpoint are taken out of
// metrics.jsonl (the steps lost) and its logs are kept in logs.attempt-N/.
// Single-threaded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "launcher/local_runner.h"
#include "launcher/preemption.h"
#include "launcher/run_folder.h"

namespace tencache {

// One start of the job's ranks, and how it ended.
struct RunAttempt {
  int number = 1;                 // 1: the first start
  std::string started_at;         // UTC, ISO 8601
  double started_s = 0, ended_s = 0;  // MonotonicSeconds
  RunOutcome outcome;
  // Set when another attempt followed it: the step that one resumed at, the
  // steps this one reported past it (lost), their measured seconds, and the
  // seconds from this one's end to the next one's first step (-1: it reported
  // none).
  bool restarted = false;
  int64_t resumed_at = 0;
  int64_t steps_lost = 0;
  double lost_step_s = 0;
  double recover_s = -1;
  std::string replanned;  // what the restart planned again (RestartPlan::replanned); "": nothing
};

// The attempt's failure, as "the same way" compares it: the rank, what
// mpirun or the rank said (digits left out: PIDs differ) and the step.
std::string FailureSignature(const RunOutcome& o);

// Whether `attempts.back()` failed the same way as the attempt before it.
bool FailedTheSameWayTwice(const std::vector<RunAttempt>& attempts);

// One line of why the attempt ended ("finished", "rank 0: <what failed>", ...).
std::string AttemptCause(const RunOutcome& o);

// Keeps the lines of `path` (metrics.jsonl) whose step is below `step` and
// removes the rest; *removed_s: the step_time_s of the removed lines, summed.
// IoError naming the file when it cannot be rewritten.
Status TrimMetrics(const std::string& path, int64_t step, int64_t* removed, double* removed_s);

// Renames the folder's logs/ to logs.attempt-N/ (N = `attempt`), replacing an
// older one of that name. IoError naming the folder.
Status KeepAttemptLogs(const RunFolder& folder, int attempt);

// Waits `seconds`; false when a SIGINT or SIGTERM arrived first (the run is
// to end, not restart).
bool WaitBeforeRestart(double seconds);

// run.json's and report.json's "attempts": one object per attempt, with
// recovery_cost_usd (the lost steps' and the recovery's seconds at
// `price_per_hour` for all nodes) where the price is known (> 0).
nlohmann::ordered_json AttemptsToJson(const std::vector<RunAttempt>& attempts, double price_per_hour);

// report.json's "spot": the plan's expectation on spot nodes (`estimate`,
// launcher/preemption.h) over this run's hours against what its `attempts`
// (AttemptsToJson's) measured: expected_preemptions (the attempts' seconds
// over the mean time between preemptions) against failed_attempts and
// restarts (every failure counts, whatever ended it); the seconds each costs
// (lost work and recovery) and their cost at the nodes' spot price, expected
// and measured (null where no restart measured one). Null unless the run was
// on spot nodes (`on_spot`) with a known estimate and `attempts` is an array.
nlohmann::ordered_json SpotAgainstAttempts(const SpotEstimate& estimate, bool on_spot, int nodes,
                                           const nlohmann::ordered_json& attempts);

}  // namespace tencache
