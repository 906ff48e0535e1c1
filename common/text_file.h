// Files as users hand them to us and as we leave them: why a path cannot be
// read, in words for a message, and writing a whole file so that no reader,
// and no crash, ever sees half of it (every file tencache-launch writes into a
// run folder goes through here). Thread-safe for distinct paths.
#pragma once

#include <string>

#include "common/status.h"

namespace tencache {

// Why `path` cannot be followed to anything: "not found", "a symbolic link
// loop", "not reachable (Permission denied)"; "" when it can (it may still be
// a folder or a device: the caller says what it expected).
std::string PathProblem(const std::string& path);

// Writes `text` to `path` through a temporary file beside it (PATH.tmp-PID),
// flushed and then renamed over `path`: `path` holds either its old contents
// or all of `text`. IoError naming the path and the reason; the temporary file
// is removed on failure.
Status WriteFileAtomically(const std::string& path, const std::string& text);

}  // namespace tencache
