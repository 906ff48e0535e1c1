// The tencache-sim command line: parse flags, build or read a trace, run the
// chosen policies through one CacheSimulator, print a table or JSON.
//
// Every bad input (unknown flag, preset or policy, unparseable size or number,
// missing trace file) comes back as a Status naming the flag, the value and the
// expected form; main() maps it to exit code 2 with ExitCodeFor. Pure functions
// over their arguments; thread-safe.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "common/status.h"
#include "scheduler/plan.h"
#include "scheduler/sim_engine.h"
#include "scheduler/synth.h"

namespace tencache {

struct SimCliOptions {
  std::string model;        // --model PRESET
  std::string trace_path;   // --trace FILE
  std::string write_trace;  // --write-trace FILE: save the (synthesised) trace
  std::vector<std::string> policies;
  bool json = false;
  bool help = false;
  SynthOptions synth;
  SimConfig sim;
};

StatusOr<SimCliOptions> ParseSimArgs(const std::vector<std::string>& args);
std::string SimUsage();
// Runs the simulation; the table or JSON text on success.
StatusOr<std::string> RunSim(const SimCliOptions& options);
std::string FormatResultsJson(const std::vector<PolicyResult>& results);
std::string FormatResultsTable(const std::vector<PolicyResult>& results);
// main(): prints to out / err and returns the exit code.
int SimMain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace tencache
