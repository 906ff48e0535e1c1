// The trainer's updates: AdamW on a block's shards, on the training thread or
// on the optimizer lane (docs/worker.md, "The optimizer lane"), and what the
// training thread does to issue, retire and finish a lane's update.
#include <algorithm>
#include <cstring>

#include "worker/lane_timer.h"
#include "worker/trainer.h"

namespace tencache {

// AdamW on the block's shards, piece by piece (ShardLayout::pieces): the
// master (in fp32 the whole parameter shard, held throughout) and both moments
// of one piece at a time, so that the host holds three pieces, not three whole
// shards, of a huge block. In mixed precision the 16-bit parameter (held from
// the first piece's rounding on, and overwritten) is rounded from each piece
// of the master once that piece is updated. A shard the plan keeps on the
// device until its next use is copied back there right after its host update
// (the update invalidated the device copy: RefreshDeviceCopy); otherwise the
// plan fetches it before its use.
Status Trainer::UpdateBlock(int b, const float* grad, bool split, int first, int last) {
  TC_RETURN_IF_ERROR(RetireUpdate());
  const double asked = Now(), waited = recorder_->WaitedSinceLastAccess();  // the update asks for its first shard
  const TensorId param = ShardTensorId(b, ShardKind::kParam);
  TensorCache* cache = store_->cache();
  const int pieces = layout_.Pieces(b, ShardKind::kAdamM);
  const bool part = last >= 0;  // a part of a streamed update
  if (!part) last = pieces;
  // Whether the device held the parameter when the (whole) update began.
  if (first == 0) updated_on_device_ = cache != nullptr && cache->IsResident(param, Tier::kDevice);
  LaneUpdate done;
  TC_RETURN_IF_ERROR(RunUpdate(b, grad, split, {first, last}, UpdateRun::kHere, threads_, &lanes_, &done));
  if (last == pieces) RefreshDeviceCopy(b, profiler_.position(), updated_on_device_);
  optimizer_wait_s_ += Now() - asked;
  return recorder_->EndAccess(b, Phase::kOptimizer, Now() - done.compute_s, asked, waited, part ? first : 0,
                              part ? last : 0);
}

Status Trainer::IssueUpdate(int b, const float* grad) {
  TC_RETURN_IF_ERROR(RetireUpdate());
  const double asked = Now();
  issued_.asked_s = asked;
  issued_.position = profiler_.position();
  TensorCache* cache = store_->cache();
  issued_.on_device = cache != nullptr && cache->IsResident(ShardTensorId(b, ShardKind::kParam), Tier::kDevice);
  // The update's events, in the step's order: the acquires UpdateBlock makes, then its end.
  LaneUpdate recorded;
  TC_RETURN_IF_ERROR(RunUpdate(b, nullptr, false, {0, layout_.Pieces(b, ShardKind::kAdamM)}, UpdateRun::kRecordOnly,
                               0, nullptr, &recorded));
  recorder_->RecordUpdateEnd(b);
  // Reduced into the lane's buffer already with ranks > 1 (ReduceGrad).
  if (grad != lane_->grad_buffer()) std::memcpy(lane_->grad_buffer(), grad, layout_.counts[size_t(b)] * sizeof(float));
  lane_->Issue(b);
  optimizer_wait_s_ += Now() - asked;
  return Status::Ok();
}

Status Trainer::RetireUpdate() {
  if (lane_ == nullptr || !lane_->in_flight()) return Status::Ok();
  const double t0 = Now();
  LaneUpdate done;
  Status st = lane_->Retire(&done);
  if (st.ok() && done.resume_piece >= 0) {
    // The lane was refused a slot the training thread pinned; it holds none
    // of them now: the rest of the update runs here.
    ++lane_yields_;
    LaneUpdate rest;
    st = RunUpdate(done.block, lane_->grad_buffer(), false,
                   {done.resume_piece, layout_.Pieces(done.block, ShardKind::kAdamM), done.resume_computed},
                   UpdateRun::kFinish, threads_, &lanes_, &rest);
    done.compute_s += rest.compute_s;
    done.acquire_waited_s += rest.acquire_waited_s;
    done.end_s = rest.end_s;
  }
  const double waited = Now() - t0;
  optimizer_wait_s_ += waited;
  recorder_->AddWait(waited);  // not the training thread's own time
  for (int l = 0; l < kStepLanes; ++l) lanes_.seconds[l] += done.lanes.seconds[l];
  TC_RETURN_IF_ERROR(st);
  RefreshDeviceCopy(done.block, issued_.position, issued_.on_device);
  recorder_->EndLaneAccess(done.block, issued_.asked_s, done.begin_s, done.acquire_waited_s,
                           done.end_s - done.compute_s, done.end_s);
  return Status::Ok();
}

void Trainer::RefreshDeviceCopy(int b, DeviceAccessIndex k, bool was_on_device) {
  const TensorId param = ShardTensorId(b, ShardKind::kParam);
  TensorCache* cache = store_->cache();
  if (recorder_->recording() && was_on_device && k.value() > 0 && driver_->KeepsOnDeviceAfterUpdate(b, k - 1) &&
      !cache->IsResident(param, Tier::kDevice)) {
    hit_counter_->NoteRefresh(b, store_->Prefetch(b, ShardKind::kParam, 0, Tier::kDevice));
  }
}

Status Trainer::RunUpdate(int b, const float* grad, bool split, PieceSpan span, UpdateRun run, int threads,
                          LaneBusy* lanes, LaneUpdate* done) {
  const bool compute = run != UpdateRun::kRecordOnly;
  int acquires = 0;  // this run's, for TEST_RefuseLaneAcquire
  // Takes a shard into *ref. false: the lane was refused it and yields, to
  // resume at piece `at` (its AdamW done when `computed`).
  auto take = [&](ShardRef* ref, ShardKind kind, int piece, AccessMode mode, int at, bool computed) -> StatusOr<bool> {
    if (run == UpdateRun::kHere) {
      TC_ASSIGN_OR_RETURN(*ref, recorder_->Acquire(b, kind, piece, Tier::kHost, mode));
      return true;
    }
    if (run == UpdateRun::kRecordOnly) {
      recorder_->RecordAcquire(b, kind, piece, Tier::kHost, mode);
      return true;
    }
    const double t0 = Now();
    StatusOr<ShardRef> got = run == UpdateRun::kLane && acquires == refuse_lane_acquire_
                                 ? StatusOr<ShardRef>(Status::ResourceExhausted("refused by TEST_RefuseLaneAcquire"))
                                 : store_->Acquire(b, kind, piece, Tier::kHost, mode);
    ++acquires;
    done->acquire_waited_s += Now() - t0;
    if (got.ok()) {
      *ref = std::move(*got);
      return true;
    }
    if (run != UpdateRun::kLane || got.status().code() != StatusCode::kResourceExhausted) return got.status();
    done->resume_piece = at;
    done->resume_computed = computed;
    return false;
  };
  done->begin_s = Now();
  double compute_s = 0;  // the update's own time, waits for its shards left out (the trace's access time)
  // The update's figures where it ends: whole, or yielded early.
  auto ended = [&] {
    done->compute_s = compute_s;
    done->end_s = Now();
    return Status::Ok();
  };
  {
    // fp32: the parameter shard, its own master, held throughout. Mixed
    // precision: the 16-bit copy, rewritten whole, held from the first piece's
    // rounding on (acquired once that piece's moments are released: at most
    // three pins of one size, as StatePieces keeps a piece and it apart).
    ShardRef whole;
    if (!layout_.mixed) {
      TC_ASSIGN_OR_RETURN(const bool got, take(&whole, ShardKind::kParam, 0, AccessMode::kWrite, span.first, false));
      if (!got) return ended();
    }
    AdamWConfig config = adamw_;
    config.lr = LearningRateAt(job_.train, step_);
    for (int i = span.first; i < span.last; ++i) {
      const bool computed = i == span.first && span.first_computed;  // only its rounding is left
      const size_t begin = layout_.PieceBegin(b, ShardKind::kAdamM, i);
      const size_t end = begin + layout_.PieceCount(b, ShardKind::kAdamM, i);
      ShardRef master;  // the piece's fp32 master (mixed precision)
      if (layout_.mixed) {
        TC_ASSIGN_OR_RETURN(const bool got, take(&master, ShardKind::kMaster, i,
                                                 computed ? AccessMode::kRead : AccessMode::kWrite, i, computed));
        if (!got) return ended();
      }
      float* p = !compute ? nullptr : layout_.mixed ? master.f32() : whole.f32() + begin;  // element `begin`
      double t0 = Now();
      if (!computed) {
        ShardRef m, v;
        TC_ASSIGN_OR_RETURN(const bool got_m, take(&m, ShardKind::kAdamM, i, AccessMode::kWrite, i, false));
        if (!got_m) return ended();
        TC_ASSIGN_OR_RETURN(const bool got_v, take(&v, ShardKind::kAdamV, i, AccessMode::kWrite, i, false));
        if (!got_v) return ended();
        t0 = Now();
        if (compute) {
          LaneTimer busy(lanes, StepLane::kOptimizer);
          if (split) split_->SwapHeldRows(begin, end, p, m.f32(), v.f32());
          for (const DecayRun& r : decay_runs_[b]) {  // the runs' parts within the piece
            const size_t lo = std::max(r.begin, begin), hi = std::min(r.end, end);
            if (lo >= hi) continue;
            config.weight_decay = r.decay ? adamw_.weight_decay : 0.0;
            auto step = [&](size_t from, size_t to) {
              AdamWStep(config, optimizer_steps_ + 1, to - from, p + (from - begin), grad + from,
                        m.f32() + (from - begin), v.f32() + (from - begin), threads);
            };
            if (split) split_->ForEachUnheld(lo, hi, step);
            else step(lo, hi);
          }
        }
      }
      if (layout_.mixed) {
        if (i == span.first) {  // the first part overwrites it; a later one writes into it
          compute_s += Now() - t0;  // the wait for the parameter's slot is not the update's
          TC_ASSIGN_OR_RETURN(const bool got, take(&whole, ShardKind::kParam, 0,
                                                   i == 0 ? AccessMode::kOverwrite : AccessMode::kWrite, i, true));
          if (!got) return ended();
          t0 = Now();
        }
        if (compute) WriteComputeCopy(whole, begin, end - begin, p, lanes);
      }
      compute_s += Now() - t0;
    }
  }
  return ended();
}

}  // namespace tencache
