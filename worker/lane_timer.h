// LaneTimer: adds the seconds from its construction to its destruction to one
// lane of a LaneBusy (the training thread's compute, collectives, optimizer).
// REQUIRES: `lanes` outlives it. The thread that owns `lanes` only.
#pragma once

#include "common/clock.h"
#include "common/step_lanes.h"

namespace tencache {

class LaneTimer {
 public:
  LaneTimer(LaneBusy* lanes, StepLane lane) : lanes_(lanes), lane_(lane), start_(MonotonicSeconds()) {}
  ~LaneTimer() { (*lanes_)[lane_] += MonotonicSeconds() - start_; }
  LaneTimer(const LaneTimer&) = delete;
  LaneTimer& operator=(const LaneTimer&) = delete;

 private:
  LaneBusy* const lanes_;
  const StepLane lane_;
  const double start_;
};

}  // namespace tencache
