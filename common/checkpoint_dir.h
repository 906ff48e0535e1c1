// The names of a checkpoint folder's entries, shared by the worker that writes
// checkpoints and the launcher that resumes, counts and reports them: a
// checkpoint of step N is DIR/step-0000000N, complete once renamed from its
// ".tmp" (worker/checkpoint.h). Pure functions over the file system; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tencache {

// "DIR/step-00000012".
std::string CheckpointFolder(const std::string& dir, int64_t step);

// The steps of the complete checkpoints in `dir` (folders step-N, not
// symlinks, without ".tmp"), newest first. An absent folder has none.
std::vector<int64_t> CompleteCheckpoints(const std::string& dir);

}  // namespace tencache
