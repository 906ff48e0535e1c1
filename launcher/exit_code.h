// The exit codes of tencache-launch, one table for every command (run, dry
// run, plan, render, report, export, status, logs, delete), and the one place
// a Status becomes an exit code and a message on stderr. Stateless;
// thread-safe (it writes one line to stderr).
#pragma once

#include <string>

#include "common/status.h"

namespace tencache {

// What tencache-launch exits with; docs/launcher.md "Exit codes" lists them.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailed = 1,          // a rank or the cluster failed, I/O, an internal error, a run not there
  kExitBadInput = 2,        // a file, key, flag or value the message names (invalid or not found)
  kExitNoFeasiblePlan = 3,  // no instance type can run the job (the message says what to change)
  kExitInterrupted = 130,   // SIGINT / SIGTERM
};

// REQUIRES: !s.ok(). Prints "tencache-launch: MESSAGE" on stderr and returns
// the exit code for `s`: kExitBadInput for kInvalidArgument and kNotFound (the
// message names the file, key or value), kExitFailed for every other code
// (common/status.h's ExitCodeFor, the mapping the worker and the simulator use
// too). Every tencache-launch command that fails with a Status ends here.
int FailCommand(const Status& s);

// Says on stderr that no instance type can run `job_path` and where each
// one's reason is; returns kExitNoFeasiblePlan.
int FailNoFeasiblePlan(const std::string& job_path);

}  // namespace tencache
