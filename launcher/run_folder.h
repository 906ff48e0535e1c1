// RunFolder: the one writer of the files a run leaves in its folder — the
// pipeline's (job.resolved.yaml, plan.json, machine.json, run.json), the
// report's (launcher/report_writer.h) and a runner's snapshots (the
// Kubernetes follower's pods.json and mpijob.json) — each written whole, with
// errors that name the file. The streams a run appends to while it follows
// (logs/*.out, metrics.jsonl) are the followers' (launcher/run_follower.h).
#pragma once

#include <string>
#include <utility>

#include "common/status.h"

namespace tencache {

// A run folder (or a folder inside one, such as logs/). Constant after
// construction; thread-safe for distinct names.
class RunFolder {
 public:
  explicit RunFolder(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }
  // DIR/NAME.
  std::string Path(const std::string& name) const;
  // Makes the folder and its parents; IoError naming the folder.
  Status Create() const;
  // DIR/NAME holds `text`, whole (common/text_file.h's WriteFileAtomically);
  // IoError naming the file. REQUIRES: the folder exists.
  Status Write(const std::string& name, const std::string& text) const;

 private:
  const std::string dir_;
};

}  // namespace tencache
