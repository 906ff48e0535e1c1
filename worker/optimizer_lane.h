// OptimizerLane: the thread beside a rank's training thread that runs its
// AdamW updates (docs/worker.md, "The optimizer lane"). The training thread
// issues one update at a time: it fills grad_buffer() with the block's
// complete gradient shard and calls Issue; the lane runs the update (acquiring
// the block's states from the cache, updating them, releasing them) while the
// training thread goes on; Retire waits for it. At most one update is in
// flight, so the gradient buffer is free whenever nothing is.
// The training thread alone calls every method.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "common/status.h"
#include "common/step_lanes.h"

namespace tencache {

// What one update did on the lane: when it began (asked for its first
// shard), its compute (AdamW and rounding; waits for its shards left out)
// ending at end_s (both MonotonicSeconds), the seconds its acquires waited,
// and its busy time by lane. An update the cache refused a slot (the training
// thread pinned the last one of its size) stops early, holding nothing:
// resume_piece >= 0 is the piece the rest begins at, resume_computed whether
// that piece's AdamW ran (its 16-bit rounding did not); the training thread
// finishes it (Trainer::RetireUpdate).
struct LaneUpdate {
  int block = -1;
  double begin_s = 0, compute_s = 0, end_s = 0, acquire_waited_s = 0;
  LaneBusy lanes;
  int resume_piece = -1;
  bool resume_computed = false;
};

class OptimizerLane {
 public:
  // Runs the update of `block` with the gradient in `grad`, filling `done`'s
  // figures. Called on the lane's thread. REQUIRES: does not throw.
  using RunFn = std::function<Status(int block, const float* grad, LaneUpdate* done)>;
  // Starts the thread; the gradient buffer holds `grad_floats` floats.
  OptimizerLane(size_t grad_floats, RunFn run);
  // Waits for the update in flight (its result is dropped), then ends the thread.
  ~OptimizerLane();
  OptimizerLane(const OptimizerLane&) = delete;
  OptimizerLane& operator=(const OptimizerLane&) = delete;

  bool in_flight() const { return in_flight_; }
  // Where the next update's gradient goes. REQUIRES: !in_flight().
  float* grad_buffer() { return grad_.data(); }
  size_t grad_floats() const { return grad_.size(); }
  // Starts the update of `block` with grad_buffer()'s gradient. REQUIRES: !in_flight().
  void Issue(int block);
  // Waits until the update in flight is done: its status, its figures in *done.
  // REQUIRES: in_flight().
  Status Retire(LaneUpdate* done);

 private:
  void Loop();

  const RunFn run_;
  std::vector<float> grad_;
  bool in_flight_ = false;  // the training thread's view
  std::mutex mu_;
  std::condition_variable cv_;
  // Guarded by mu_.
  bool issued_ = false, finished_ = false, stop_ = false;
  int block_ = -1;
  Status status_;
  LaneUpdate done_;
  std::thread thread_;  // last: started once everything above is
};

}  // namespace tencache
