// Pictures drawn by gnuplot, run as a child process (fork/exec of an argument
// vector, no shell, stdin from /dev/null, a time limit), from a script and data
// file left beside the picture so that a user can rerun and edit it.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "common/text_file.h"

namespace tencache {

// The executable `name` in a PATH directory, or "" when there is none.
std::string FindOnPath(const std::string& name);

struct ProcessResult {
  int exit_code = -1;  // -1: killed by a signal or by the timeout
  std::string output;  // stdout and stderr together
};
// Runs exe with args (args[0] is the program name) in `cwd` ("" : here), and
// waits at most timeout_s (then kills it). IoError when it cannot start.
StatusOr<ProcessResult> RunProcess(const std::string& exe, const std::vector<std::string>& args,
                                   const std::string& cwd, int timeout_s);

struct Gnuplot {
  std::string exe;       // "" when not on PATH
  std::string terminal;  // "pngcairo" or "png"
};
// Finds gnuplot on PATH and asks it once which PNG terminal it has.
Gnuplot FindGnuplot(int timeout_s);

// A gnuplot string literal: single quotes, an inner quote doubled.
std::string GnuplotQuote(const std::string& s);
// A script's first lines: PNG terminal of width x height writing ../NAME.png,
// NaN as missing data, a grid, the key on top.
std::string GnuplotHeader(const Gnuplot& g, const std::string& name, int width, int height);
// A data-file number ("NaN" for NaN).
std::string GnuplotNumber(double v);
// "[0:top]" with headroom above `max`; "[0:1]" for an all-zero series.
std::string GnuplotRangeFromZero(double max);

// Writes run_dir/plots/NAME.dat and NAME.gp and runs gnuplot there, which must
// write run_dir/NAME.png (an older one is removed first). Returns gnuplot's
// output (warnings); IoError / Internal naming the script otherwise.
// REQUIRES: g.exe non-empty; run_dir/plots exists.
StatusOr<std::string> DrawWithGnuplot(const Gnuplot& g, const std::string& run_dir, const std::string& name,
                                      const std::string& data, const std::string& script, int timeout_s);

}  // namespace tencache
