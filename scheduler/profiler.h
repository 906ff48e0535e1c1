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
// of the step. The profiled step is the first, which pays for warming up
// (allocations, first touches); where later steps are timed as well
// (set_followed_steps_timed), timed_profile() gives the profile with their
// compute times instead. Not thread-safe: call from the training thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

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
  // When the training thread asked for the tensor (<= start_s; the wait for
  // it lies between), or < 0 when not recorded: the access's lead_s is the
  // time from the end of the step's previous event (or the step's start) to
  // here, less waited_s.
  double asked_s = -1;
  double waited_s = 0;  // of that time, spent waiting (in acquires), not in its own work
  int pieces_begin = 0, pieces_end = 0;  // an update's state pieces (TraceEvent); 0, 0: all
  // An update that ran on the optimizer lane (TraceEvent::optimizer_lane):
  // start_s and end_s are the lane's compute, asked_s when the lane asked for
  // its states, and its lead_s and wait_s are measured from issued_s, when the
  // training thread issued it (< 0: not recorded), instead of from the
  // previous event's end. It is no event of the training thread's: the next
  // access's lead and wait are measured from the event before it.
  bool optimizer_lane = false;
  double issued_s = -1;
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
  // The index of the current step's next device access (the device accesses
  // recorded so far in it).
  DeviceAccessIndex position() const { return DeviceAccessIndex(position_); }
  int reprofile_count() const { return reprofiles_; }

  // Steps whose compute times timed_profile() keeps, the latest ones.
  static constexpr int kTimedSteps = 9;
  // True when an access recorded on a step that follows the profile ends when
  // its compute has finished (a device that computes synchronously, like the
  // CPU), so that step's access durations are compute times. Off by default:
  // on a GPU only profiling steps wait for the kernels.
  void set_followed_steps_timed(bool timed) { followed_steps_timed_ = timed; }
  // Timed steps that timed_profile() takes its medians over: the latest (at
  // most kTimedSteps) that followed the current profile to its end.
  int timed_steps() const { return timed_steps_ < kTimedSteps ? timed_steps_ : kTimedSteps; }
  // REQUIRES: has_profile(). The profile, with each access's duration (end_s -
  // start_s), lead_s and wait_s the medians over the last kTimedSteps timed steps
  // where there are any; the durations, and the leads, scaled alike so that they
  // sum to the median over those steps of their step's sum. Every later event is
  // moved by the duration's change of each training-thread access before it (an
  // optimizer lane's update runs beside them), so gaps and order stay.
  Trace timed_profile() const;

 private:
  void Diverge(const std::string& why);

  TraceHeader header_;
  LogSink log_;
  Trace profile_;
  std::vector<TensorId> profile_order_;  // device accesses of the profile
  std::vector<size_t> profile_accesses_;  // indices of the profile's access events
  Trace current_;
  uint64_t position_ = 0;  // device accesses recorded in the current step
  bool diverged_ = false;
  bool followed_steps_timed_ = false;
  // Access events of the current step that matched the profile's access at the
  // same position (id and phase), and their durations.
  size_t accesses_ = 0;
  bool accesses_match_ = true;
  std::vector<double> step_durations_, step_leads_, step_waits_;
  double last_end_ = 0;  // end of the current step's latest event on the training thread
  // Per access event of the profile: durations, leads and waits of the last
  // kTimedSteps timed steps, timed_steps_ % kTimedSteps the next to replace.
  std::vector<std::vector<double>> durations_, leads_, waits_;
  int timed_steps_ = 0;
  int version_ = 0;
  int reprofiles_ = 0;
};

}  // namespace tencache
