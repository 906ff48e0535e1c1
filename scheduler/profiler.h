// Profiler: watches the worker's steps and keeps the profiled access order.
//
// The first step is recorded in full (every tensor access and collective) and
// becomes the profile when EndStep() is called. On every later step each device
// access (fwd/bwd) is compared with the profile at the same position; at the
// first mismatch (a dynamic model took another path) the profiler logs once
// "re-profiling: order changed at access k ...", stops vouching for the plan for
// the rest of the step (following() turns false, so the worker fetches on demand
// instead of waiting on fetches that will not come) and the step it is recording
// replaces the profile at EndStep(). profile_version() counts profiles, so the
// worker knows when to rebuild its PrefetchPlan. Times are seconds from the start
// of the step. Not thread-safe: call from the training thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "cachemgr/types.h"
#include "common/status.h"
#include "scheduler/trace.h"

namespace tencache {

struct AccessRecord {
  TensorId id = 0;
  std::string name;
  Phase phase = Phase::kForward;
  int block = 0;
  uint64_t bytes = 0;
  double start_s = 0;
  double end_s = 0;
};

struct CollectiveRecord {
  CollectiveKind kind = CollectiveKind::kAllGather;
  int block = 0;
  uint64_t bytes = 0;
  double start_s = 0;
  double end_s = 0;
};

class Profiler {
 public:
  using LogSink = std::function<void(const std::string&)>;
  // `header` is copied into every profile; `log` receives the re-profiling line.
  Profiler(TraceHeader header, LogSink log);

  void RecordAccess(const AccessRecord& access);
  void RecordCollective(const CollectiveRecord& collective);
  // Closes the step. The first step, or one that diverged, becomes the profile;
  // InvalidArgument (naming the event) when that step is not a valid trace, in
  // which case the previous profile, if any, stays.
  Status EndStep();

  bool has_profile() const { return version_ > 0; }
  // REQUIRES: has_profile().
  const Trace& profile() const { return profile_; }
  int profile_version() const { return version_; }
  // True while the step so far matches the profile access for access.
  bool following() const { return has_profile() && !diverged_; }
  // Device accesses recorded in the current step (the next AccessIndex).
  AccessIndex position() const { return position_; }
  int reprofile_count() const { return reprofiles_; }

 private:
  void Diverge(const std::string& why);

  TraceHeader header_;
  LogSink log_;
  Trace profile_;
  std::vector<TensorId> profile_order_;  // device accesses of the profile
  Trace current_;
  AccessIndex position_ = 0;
  bool diverged_ = false;
  int version_ = 0;
  int reprofiles_ = 0;
};

}  // namespace tencache
