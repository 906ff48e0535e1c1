// The tencache-sim command line: parse flags, build or read a trace, run the
// chosen policies through one CacheSimulator, print a table or JSON.
//
// Flags are parsed with CLI11 (common/cli.h): `--flag value` or `--flag=value`,
// `--help`, `--version`. Every bad input (unknown flag, preset or policy,
// unparseable size or number, missing trace file) gives one message naming the
// flag, the value and the expected form, and exit code 2. Pure functions over
// their arguments; thread-safe.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "common/status.h"
#include "scheduler/plan.h"
#include "scheduler/sim_engine.h"
#include "scheduler/synth.h"
#include "scheduler/zero_infinity_coordinator.h"

namespace tencache {

struct SimCliOptions {
  std::string model;        // --model PRESET
  std::string trace_path;   // --trace FILE
  std::string write_trace;  // --write-trace FILE: save the (synthesised) trace
  std::vector<std::string> policies;
  bool json = false;
  SynthOptions synth;
  SimConfig sim;
  ZeroInfinityKnobs zero_infinity;  // how the zero-infinity policy runs
};

// Parses `args` (without the program name) into *options. Returns -1 when the
// simulation should run; otherwise the exit code, after printing the help or the
// version to `out` (0) or one error line to `err` (2).
int ParseSimArgs(const std::vector<std::string>& args, SimCliOptions* options, std::ostream& out,
                 std::ostream& err);
// Runs the simulation; the table or JSON text on success.
StatusOr<std::string> RunSim(const SimCliOptions& options);
std::string FormatResultsJson(const std::vector<PolicyResult>& results);
// `optimizer_lane`: the trace runs updates on the optimizer lane; the table
// then shows the training thread's wait for it (OPT_WAIT_S) after the stall.
std::string FormatResultsTable(const std::vector<PolicyResult>& results, bool optimizer_lane = false);
// main(): prints to out / err and returns the exit code.
int SimMain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace tencache
