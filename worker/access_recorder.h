// AccessRecorder: the one place a training step's accesses to the store pass
// through and are recorded. Every training acquire (Acquire), every consumed
// stored gradient (Invalidate) and every end of an access's compute
// (EndAccess) goes through it; while recording (a training step, not
// evaluation, sampling, checkpointing or initialisation) it
//  - appends the step's event stream of scheduler/step_events.h, in order:
//    StepEvent::Acquire, ::Invalidate, ::AccessEnd;
//  - gives each access end to the Profiler (the trace) and to the cache
//    policy's PrefetchDriver (AfterAccess, device accesses only);
//  - times the acquires (WaitedSinceLastAccess: the wait inside acquires since
//    the step's previous access ended).
// The step that becomes the profile is kept (KeepAsProfile): its events and
// the cache ids of its acquires in order (the eviction oracle's order) both
// come from the one event stream. Buffers keep their capacity across steps: a
// steady-state step allocates nothing here.
// Training thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "common/status.h"
#include "scheduler/profiler.h"
#include "scheduler/step_events.h"
#include "worker/compute_device.h"
#include "worker/prefetch_driver.h"
#include "worker/shard_store.h"

namespace tencache {

class AccessRecorder {
 public:
  // REQUIRES: `store`, `layout` and `profiler` outlive the recorder.
  // `device`: synced before a profiled access ends (its GPU time, not its enqueue time).
  AccessRecorder(ShardStore* store, const ShardLayout* layout, Profiler* profiler, ComputeDevice device);

  // The driver whose AfterAccess each device access end reaches; nullptr: none.
  // REQUIRES: it outlives the recorder.
  void set_driver(PrefetchDriver* driver) { driver_ = driver; }

  // Whether the accesses are a training step's (recorded). True unless an
  // Unrecorded is in scope.
  bool recording() const { return recording_; }
  // While in scope, the accesses are outside the training step: nothing is
  // recorded, the driver is not told. Not nested.
  class Unrecorded {
   public:
    explicit Unrecorded(AccessRecorder* r) : r_(r) { r_->recording_ = false; }
    ~Unrecorded() { r_->recording_ = true; }
    Unrecorded(const Unrecorded&) = delete;
    Unrecorded& operator=(const Unrecorded&) = delete;

   private:
    AccessRecorder* r_;
  };

  // A training step begins now: its events so far are none.
  void BeginStep();
  double step_start() const { return step_start_; }
  // Forgets what was recorded since the last BeginStep (initialisation is no step).
  void Discard() { events_.clear(); }

  // Called when an acquire finds every slot of its size pinned
  // (ResourceExhausted): releases the pins held beside the training thread
  // (the optimizer lane's update, retired) and says whether it released any;
  // the acquire is then tried once more. An error fails the acquire.
  using PinRelease = std::function<StatusOr<bool>()>;
  void set_pin_release(PinRelease release) { pin_release_ = std::move(release); }

  // The store's Acquire, timed, and recorded as StepEvent::Acquire.
  StatusOr<ShardRef> Acquire(int block, ShardKind kind, int piece, Tier tier, AccessMode mode);
  // An acquire made elsewhere (the optimizer lane acquires an issued update's
  // shards itself): recorded as StepEvent::Acquire here, in the step's order.
  void RecordAcquire(int block, ShardKind kind, int piece, Tier tier, AccessMode mode) {
    if (recording_) events_.push_back(StepEvent::Acquire(block, ShardKindClass(kind), piece, tier, mode));
  }
  // An issued update's end, in the step's order: StepEvent::AccessEnd (its
  // times reach the Profiler when it is retired: EndLaneAccess).
  void RecordUpdateEnd(int block) {
    if (recording_) events_.push_back(StepEvent::AccessEnd(block, Phase::kOptimizer, 0, 0));
  }
  // An update that ran on the optimizer lane, retired: its times for the
  // Profiler (AccessRecord::optimizer_lane): issued by the training thread at
  // issued_s, begun by the lane at asked_s, waiting waited_s in its acquires,
  // computing from start_s to end_s. Its StepEvents were recorded at its issue.
  void EndLaneAccess(int block, double issued_s, double asked_s, double waited_s, double start_s, double end_s);
  // The store's Invalidate of a consumed stored piece (dropped without a
  // write-back), recorded as StepEvent::Invalidate.
  void Invalidate(int block, ShardKind kind, int piece);
  // Seconds inside Acquire since the step's previous access ended (or the step began).
  double WaitedSinceLastAccess() const { return acquire_s_ - acquire_mark_; }
  // The access of `block` in `phase` ended now: its compute began at start_s,
  // the training thread asked for it at asked_s having spent waited_s of the
  // time since the previous access inside Acquire. An update that streams a
  // part of its pieces gives them ([begin, end); 0, 0: all). Recorded for the
  // Profiler and as StepEvent::AccessEnd; a device access's end reaches the
  // driver's AfterAccess, whose error (a cache I/O failure) is returned and
  // fails the step.
  // `end_s` >= 0: the compute ended then (ComputeEnd), not now.
  Status EndAccess(int block, Phase phase, double start_s, double asked_s, double waited_s, int pieces_begin = 0,
                   int pieces_end = 0, double end_s = -1);
  // Now, as an access's end: on a device being profiled, once its compute is done.
  double ComputeEnd() const;
  // The training thread waited `seconds` outside an acquire (for the optimizer
  // lane): counted in WaitedSinceLastAccess like an acquire's wait.
  void AddWait(double seconds) { acquire_s_ += seconds; }
  // A collective of this rank from `start_s` until now, for the Profiler.
  void RecordCollective(CollectiveKind kind, int block, uint64_t bytes, double start_s);

  // The current step became the profile: keeps its events and acquire order.
  void KeepAsProfile();
  // This step's events so far, in emission order.
  const std::vector<StepEvent>& events() const { return events_; }
  // The events of the step that became the current profile, in emission order.
  const std::vector<StepEvent>& profiled_events() const { return profiled_events_; }
  // The cache ids that step acquired, in order (its StepEvent::Acquire events).
  const std::vector<TensorId>& acquire_order() const { return acquire_order_; }

 private:
  // The Profiler's record of an access of `block`'s parameter: times (MonotonicSeconds) made the step's.
  AccessRecord Record(int block, Phase phase, double start_s, double end_s, double asked_s, double waited_s) const;

  ShardStore* const store_;
  const ShardLayout* const layout_;
  Profiler* const profiler_;
  const ComputeDevice device_;
  PrefetchDriver* driver_ = nullptr;
  PinRelease pin_release_;
  bool recording_ = true;
  double step_start_ = 0;
  double acquire_s_ = 0;     // seconds inside Acquire, cumulative
  double acquire_mark_ = 0;  // acquire_s_ when the step's latest access ended (or the step began)
  std::vector<StepEvent> events_, profiled_events_;
  std::vector<TensorId> acquire_order_;
};

}  // namespace tencache
