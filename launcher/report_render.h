// Run report: turns a run folder of `tencache-launch` (report.json, and rank 0's
// per-step metrics.jsonl) into report.md, PNG pictures drawn by gnuplot, and a
// short plain-text summary for stdout. Used at the end of a run and by
// `tencache-launch report DIR` on a finished or interrupted run's folder.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace tencache {

// REQUIRES: run_dir/report.json is one JSON object with "job" (string),
// "measured" and "predicted" (objects) and "cost_per_epoch" (array of objects
// with "instance_type"). Every other field is optional: absent or null is
// skipped, present with the wrong type is an error.
// metrics.jsonl may be absent, empty, partial, or end in a truncated line: a
// line that does not parse is skipped and report.md says which.
//
// Guarantees when report.json is valid: run_dir/report.md is (re)written and
// *summary (when non-null) holds a plain-text table: measured vs predicted step
// time, tokens/s, stall, hit rate, bytes per tier, prediction error, the
// overlap efficiency (when measured), and the 5
// cheapest feasible instance types by calibrated cost per epoch. Pictures: when
// `gnuplot` is on PATH, run_dir/loss_step_time.png and stall_bytes.png (when
// metrics has steps), lanes.png (when the report has measured lanes) and cost_per_epoch.png (when some instance type is
// feasible), each drawn from a script and data file left in run_dir/plots/ (rerun
// with `cd run_dir/plots && gnuplot NAME.gp`). gnuplot runs as a child process
// (fork/exec of an argument vector, no shell). Without gnuplot, report.md says
// pictures need `gnuplot-nox` and the call still returns Ok.
// *warnings (when non-null) gets one line per thing the caller should print:
// gnuplot missing, metrics lines skipped, no steps, gnuplot's own warnings.
//
// Errors: NotFound / InvalidArgument naming report.json and what was expected;
// IoError naming a file that could not be written; Internal with gnuplot's
// output when gnuplot fails (report.md and *summary are still written, without
// that picture). Thread-safe for distinct run_dirs.
Status RenderReport(const std::string& run_dir, std::string* summary,
                    std::vector<std::string>* warnings = nullptr);

}  // namespace tencache
