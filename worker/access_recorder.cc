#include "worker/access_recorder.h"

#include <string>

#include "common/clock.h"

namespace tencache {
namespace {

// The shard kind holding state class `state` (ShardKindClass's inverse).
ShardKind KindOfClass(int state) {
  switch (state) {
    case kStateGrad: return ShardKind::kGrad;
    case kStateMaster: return ShardKind::kMaster;
    case kStateAdamM: return ShardKind::kAdamM;
    case kStateAdamV: return ShardKind::kAdamV;
    default: return ShardKind::kParam;
  }
}

}  // namespace

AccessRecorder::AccessRecorder(ShardStore* store, const ShardLayout* layout, Profiler* profiler, ComputeDevice device)
    : store_(store), layout_(layout), profiler_(profiler), device_(device) {}

void AccessRecorder::BeginStep() {
  step_start_ = MonotonicSeconds();
  acquire_mark_ = acquire_s_;
  events_.clear();  // capacity kept: no allocation once a step has run
}

StatusOr<ShardRef> AccessRecorder::Acquire(int block, ShardKind kind, int piece, Tier tier, AccessMode mode) {
  if (recording_) events_.push_back(StepEvent::Acquire(block, ShardKindClass(kind), piece, tier, mode));
  double t0 = MonotonicSeconds();
  StatusOr<ShardRef> ref = store_->Acquire(block, kind, piece, tier, mode);
  acquire_s_ += MonotonicSeconds() - t0;
  if (!ref.ok() && ref.status().code() == StatusCode::kResourceExhausted && pin_release_) {
    TC_ASSIGN_OR_RETURN(const bool released, pin_release_());  // counts its own wait
    if (released) {
      t0 = MonotonicSeconds();
      ref = store_->Acquire(block, kind, piece, tier, mode);
      acquire_s_ += MonotonicSeconds() - t0;
    }
  }
  return ref;
}

void AccessRecorder::Invalidate(int block, ShardKind kind, int piece) {
  if (recording_) events_.push_back(StepEvent::Invalidate(block, ShardKindClass(kind), piece));
  store_->Invalidate(block, kind, piece);
}

AccessRecord AccessRecorder::Record(int block, Phase phase, double start_s, double end_s, double asked_s,
                                    double waited_s) const {
  AccessRecord a;
  a.id = TensorId(block);
  a.name = "block" + std::to_string(block) + ".param";
  a.phase = phase;
  a.block = block;
  a.bytes = layout_->Bytes(block, ShardKind::kParam);
  a.start_s = start_s - step_start_;
  a.end_s = end_s - step_start_;
  a.asked_s = asked_s - step_start_;
  a.waited_s = waited_s;
  return a;
}

double AccessRecorder::ComputeEnd() const {
  if (recording_ && !profiler_->following()) SyncCompute(device_);  // profiling: the access's GPU time, not its enqueue time
  return MonotonicSeconds();
}

Status AccessRecorder::EndAccess(int block, Phase phase, double start_s, double asked_s, double waited_s,
                                 int pieces_begin, int pieces_end, double end_s) {
  if (!recording_) return Status::Ok();
  if (end_s < 0) end_s = ComputeEnd();
  AccessRecord a = Record(block, phase, start_s, end_s, asked_s, waited_s);
  a.pieces_begin = pieces_begin;
  a.pieces_end = pieces_end;
  profiler_->RecordAccess(a);
  events_.push_back(StepEvent::AccessEnd(block, phase, pieces_begin, pieces_end));
  acquire_mark_ = acquire_s_;
  if (phase != Phase::kOptimizer && driver_ != nullptr) return driver_->AfterAccess(profiler_->position() - 1, block);
  return Status::Ok();
}

void AccessRecorder::EndLaneAccess(int block, double issued_s, double asked_s, double waited_s, double start_s,
                                   double end_s) {
  if (!recording_) return;
  AccessRecord a = Record(block, Phase::kOptimizer, start_s, end_s, asked_s, waited_s);
  a.optimizer_lane = true;
  a.issued_s = issued_s - step_start_;
  profiler_->RecordAccess(a);
}

void AccessRecorder::RecordCollective(CollectiveKind kind, int block, uint64_t bytes, double start_s) {
  if (!recording_) return;
  profiler_->RecordCollective({kind, block, bytes, start_s - step_start_, MonotonicSeconds() - step_start_});
}

void AccessRecorder::KeepAsProfile() {
  profiled_events_ = events_;
  acquire_order_.clear();
  for (const StepEvent& e : profiled_events_) {
    if (e.kind != StepEventKind::kAcquire) continue;
    acquire_order_.push_back(layout_->Id(e.block, KindOfClass(e.state), e.piece));
  }
}

}  // namespace tencache
