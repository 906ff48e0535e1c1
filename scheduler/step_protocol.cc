#include "scheduler/step_protocol.h"

#include <algorithm>
#include <limits>

#include "common/shard_bytes.h"
#include "scheduler/plan.h"

namespace tencache {

StepShape StepShapeOf(const Trace& trace) {
  StepShape s;
  const DType dtype = TraceDType(trace);
  s.mixed = StateElementBytes(dtype, kStateMaster) != 0;
  s.deferred = trace.header.deferred_updates;
  const uint64_t elem = StateElementBytes(dtype, kStateParam);
  const std::vector<uint64_t> params = trace.TensorBytes();
  const size_t n = params.size();
  std::vector<int> block(n, 0);
  int last_block = 0;
  for (const TraceEvent& e : trace.events) {
    if (e.kind != EventKind::kAccess) continue;
    block[e.id] = e.block;
    last_block = std::max(last_block, e.block);
  }
  s.counts.resize(n);
  uint64_t limit = 0;
  for (size_t id = 0; id < n; ++id) {
    s.counts[id] = (params[id] + elem - 1) / elem;
    if (block[id] >= 1 && block[id] < last_block) limit = std::max(limit, s.counts[id]);
  }
  s.pieces = StatePiecesWithin(s.counts, limit, dtype);
  return s;
}

namespace {

constexpr size_t kNone = std::numeric_limits<size_t>::max();

class Deriver {
 public:
  Deriver(const Trace& trace, const StepShape& shape) : trace_(trace), shape_(shape) {
    const size_t n = shape.pieces.size();
    first_update_.assign(n, kNone);
    before_update_.assign(n, 0);
    backwards_.assign(n, 0);
    contributions_.assign(n, 0);
    consumed_.assign(n, false);
    for (size_t i = 0; i < trace.events.size(); ++i) {
      const TraceEvent& e = trace.events[i];
      if (e.kind != EventKind::kAccess) continue;
      last_block_ = std::max(last_block_, e.block);
      if (e.phase == Phase::kOptimizer) {
        any_update_ = true;
        first_update_[e.id] = std::min(first_update_[e.id], i);
      } else if (e.phase == Phase::kBackward) {
        ++backwards_[e.id];
        before_update_[e.id] += first_update_[e.id] == kNone;
      }
    }
  }

  StepStream Run() {
    const std::vector<TraceEvent>& events = trace_.events;
    size_t head = kNone;  // a tied head's access whose gradient is reduced after the next access
    for (size_t i = 0; i < events.size(); ++i) {
      const TraceEvent& e = events[i];
      if (e.kind != EventKind::kAccess) continue;
      if (pending_ != kNone && !(e.phase == Phase::kOptimizer && e.id == head_update_)) FlushPending();
      if (late_ != kNone && !(e.phase == Phase::kOptimizer && e.id == late_)) FlushLate();
      at_ = i;
      if (e.phase == Phase::kOptimizer) {
        Update(e);
        if (pending_ != kNone && e.id == head_update_) FlushPending();
        continue;
      }
      Emit(StepEvent::Acquire(int(e.id), kStateParam, 0, Tier::kDevice, AccessMode::kRead));
      Emit(StepEvent::AccessEnd(int(e.id), e.phase));
      if (e.phase != Phase::kBackward) continue;
      if (last_block_ >= 2 && e.block == last_block_) {
        const size_t next = NextAccess(i);
        if (next != kNone && events[next].phase == Phase::kBackward && events[next].block == 0) {
          head = e.id;
          continue;
        }
      }
      if (head != kNone) {  // the head's reduction (and its update), then the embedding's
        Reduce(head);
        pending_ = e.id;
        head_update_ = head;
        head = kNone;
        continue;
      }
      Reduce(e.id);
    }
    if (pending_ != kNone) FlushPending();
    if (late_ != kNone) FlushLate();
    if (shape_.deferred && !any_update_) {  // skipped (fp16 overflow): every stored gradient is dropped
      for (size_t id = 0; id < shape_.pieces.size(); ++id) {
        for (int p = 0; p < shape_.pieces[id]; ++p) Emit(StepEvent::Invalidate(int(id), kStateGrad, p));
      }
    }
    out_.begin.assign(events.size() + 1, out_.events.size());
    for (size_t k = out_.events.size(); k-- > 0;) out_.begin[out_.source[k]] = k;
    for (size_t i = events.size(); i-- > 0;) out_.begin[i] = std::min(out_.begin[i], out_.begin[i + 1]);
    return std::move(out_);
  }

 private:
  size_t NextAccess(size_t i) const {
    for (size_t j = i + 1; j < trace_.events.size(); ++j) {
      if (trace_.events[j].kind == EventKind::kAccess) return j;
    }
    return kNone;
  }

  void Emit(const StepEvent& e) {
    out_.events.push_back(e);
    out_.source.push_back(at_);
  }

  void Reduce(TensorId id) {
    const int k = contributions_[id]++;
    if (shape_.deferred || k + 1 < before_update_[id]) {
      const AccessMode mode = k == 0 ? AccessMode::kOverwrite : AccessMode::kWrite;
      for (int p = 0; p < shape_.pieces[id]; ++p) Emit(StepEvent::Acquire(int(id), kStateGrad, p, Tier::kHost, mode));
    }
    const bool split = first_update_[id] != kNone && backwards_[id] > before_update_[id];
    if (split && k + 1 == backwards_[id]) late_ = id;
  }

  void FlushPending() {
    const size_t id = pending_;
    pending_ = kNone;
    Reduce(id);
  }

  void FlushLate() {
    Emit(StepEvent::Acquire(int(late_), kStateParam, 0, shape_.late_rows_tier, AccessMode::kWrite));
    late_ = kNone;
  }

  void Update(const TraceEvent& e) {
    const TensorId id = e.id;
    const int pieces = shape_.pieces[id];
    const int first = e.pieces_end > 0 ? std::min(e.pieces_begin, pieces) : 0;
    const int last = e.pieces_end > 0 ? std::min(e.pieces_end, pieces) : pieces;
    if (first == 0 && !consumed_[id] && (shape_.deferred || before_update_[id] > 1)) {
      consumed_[id] = true;
      for (int p = 0; p < pieces; ++p) {
        Emit(StepEvent::Acquire(int(id), kStateGrad, p, Tier::kHost, AccessMode::kRead));
        Emit(StepEvent::Invalidate(int(id), kStateGrad, p));
      }
    }
    if (!shape_.mixed) Emit(StepEvent::Acquire(int(id), kStateParam, 0, Tier::kHost, AccessMode::kWrite));
    for (int p = first; p < last; ++p) {
      for (int state : {kStateMaster, kStateAdamM, kStateAdamV}) {
        if (state == kStateMaster && !shape_.mixed) continue;
        Emit(StepEvent::Acquire(int(id), state, p, Tier::kHost, AccessMode::kWrite));
      }
      if (shape_.mixed && p == first) {
        Emit(StepEvent::Acquire(int(id), kStateParam, 0, Tier::kHost,
                                p == 0 ? AccessMode::kOverwrite : AccessMode::kWrite));
      }
    }
    Emit(StepEvent::AccessEnd(int(id), Phase::kOptimizer, e.pieces_begin, e.pieces_end));
  }

  const Trace& trace_;
  const StepShape& shape_;
  int last_block_ = 0;
  bool any_update_ = false;
  std::vector<size_t> first_update_;  // per tensor: its first optimizer access (kNone: none)
  std::vector<int> before_update_;    // per tensor: backward accesses before it
  std::vector<int> backwards_;        // per tensor: backward accesses in the step
  std::vector<int> contributions_;    // per tensor: reduced so far
  std::vector<bool> consumed_;        // per tensor: its stored gradient was read by its update
  size_t late_ = kNone;               // a split update's tensor whose held rows are written next
  size_t pending_ = kNone;            // a tied embedding whose head contribution is reduced next
  size_t head_update_ = kNone;        // the head whose update, when next, comes before that reduction
  size_t at_ = 0;                     // the trace event being derived
  StepStream out_;
};

}  // namespace

StepStream DeriveStepEvents(const Trace& trace, const StepShape& shape) {
  return Deriver(trace, shape).Run();
}

}  // namespace tencache
