// OptimizerLaneTimeline: the timeline of the optimizer lane (train.optimizer_overlap;
// the worker's thread is worker/optimizer_lane.h),
// as the simulator replays it (the planner's per-block form of the same rule
// is docs/resource-model.md's). The training thread issues an
// update and goes on at once; the lane runs updates one at a time, in issue
// order; the training thread retires the update in flight (waits for the lane
// to finish it) at the earliest of its next access's end, the next update's
// issue and the step's end, so at most one update is in flight. Times are
// seconds on the caller's clock. A plain value; thread-compatible.
#pragma once

#include <algorithm>

namespace tencache {

class OptimizerLaneTimeline {
 public:
  // The training thread, at `now`, issues an update: the lane starts it then.
  // REQUIRES: the update issued before it is retired (Retire), so the lane is
  // free by `now`.
  double Issue(double now) {
    in_flight_ = true;
    return std::max(now, free_at_);
  }
  // The update issued last ends on the lane at `end` (>= its start).
  void Finish(double end) { free_at_ = std::max(free_at_, end); }
  // The training thread, at `now`, retires the update in flight: returns when
  // it goes on, the update's end where that is later; `now` when none is in flight.
  double Retire(double now) {
    if (!in_flight_) return now;
    in_flight_ = false;
    return std::max(now, free_at_);
  }
  bool in_flight() const { return in_flight_; }

 private:
  double free_at_ = 0;  // the end of the latest update
  bool in_flight_ = false;
};

}  // namespace tencache
