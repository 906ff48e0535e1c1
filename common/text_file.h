// Writing a whole file so that no reader, and no crash, ever sees half of it:
// every file tencache-launch writes into a run folder (run.json, report.json,
// report.md, the resolved job, plots) goes through here. Thread-safe for
// distinct paths.
#pragma once

#include <string>

#include "common/status.h"

namespace tencache {

// Writes `text` to `path` through a temporary file beside it (PATH.tmp-PID),
// flushed and then renamed over `path`: `path` holds either its old contents
// or all of `text`. IoError naming the path and the reason; the temporary file
// is removed on failure.
Status WriteFileAtomically(const std::string& path, const std::string& text);

}  // namespace tencache
