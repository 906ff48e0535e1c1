// The step protocol: a training step's whole event stream (scheduler/
// step_events.h) derived from its trace — the one statement of the order in
// which the worker's training thread acquires shard pieces, stores and
// consumes gradients, and ends device accesses. The Trainer emits this stream;
// HostTierModel and the simulator replay it.
//
// Contract (a trace's tensor id names the block: StepEvent::block is the id):
// * Device access (forward or backward): acquire its parameter on the device
//   tier for reading, then its AccessEnd.
// * Gradient contribution: a backward access's gradient is reduced right after
//   its AccessEnd; the head of a tied embedding (a backward access of the last
//   block directly followed by one of block 0) is reduced after block 0's
//   access ends, whose compute is the head's; block 0's own contribution
//   follows, after the head's update when that comes next.
//   Contribution k of a tensor (k from 0, over the step) stores every gradient
//   piece on the host (k = 0 overwrites, later ones read and add: write) when
//   updates are deferred (every contribution), or when k is before the last
//   contribution preceding the tensor's first update (accumulation); the last
//   one before the update goes to it unstored; one after it (the lookup of a
//   split tied-embedding update) stores nothing.
// * Update (an optimizer access, or one part of a streamed update: pieces
//   [pieces_begin, pieces_end)): the whole update, or the part starting at
//   piece 0, first reads each stored gradient piece and consumes it
//   (Invalidate: dropped without a write-back) when the update follows more
//   than one contribution or updates are deferred. Then fp32: the parameter
//   (its own master) for writing, held throughout; per piece adam_m and
//   adam_v. Mixed precision: per piece master, adam_m and adam_v, and after
//   the part's first piece the 16-bit parameter (overwritten when that piece
//   is 0, written otherwise). Then its AccessEnd.
// * Split update: after the last backward of a tensor updated before it (the
//   lookup of a tied embedding), once its update's remaining parts ran, the
//   parameter is acquired for writing its held rows on StepShape's
//   late_rows_tier.
// * Deferred updates skipped (an fp16 overflow: a deferred trace without
//   updates): at the end every stored gradient piece is consumed unread.
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <vector>

#include "cachemgr/types.h"
#include "scheduler/step_events.h"
#include "scheduler/trace.h"

namespace tencache {

// What the trace says about its step beyond its accesses.
struct StepShape {
  bool mixed = false;     // a 16-bit parameter with an fp32 master (the trace's dtype is not fp32)
  bool deferred = false;  // updates after the whole backward (TraceHeader::deferred_updates)
  // Per tensor id: elements of its shard, and the pieces each fp32 state is
  // cut into (common/shard_bytes.h StatePiecesWithin, the largest tensor of
  // blocks 1 .. last-1 as the limit).
  std::vector<uint64_t> counts;
  std::vector<int> pieces;
  // Where a split update writes its held rows of the parameter: the device
  // tier where that is host memory holding the parameter (a CPU worker),
  // the host tier otherwise.
  Tier late_rows_tier = Tier::kHost;
};

// REQUIRES: ValidateTrace(trace).ok().
StepShape StepShapeOf(const Trace& trace);

struct StepStream {
  std::vector<StepEvent> events;
  // Per event: the trace event it belongs to (an access's acquires before its
  // AccessEnd, the reductions and writes after it); non-decreasing.
  std::vector<size_t> source;
  // Per trace event i: its events are [begin[i], begin[i + 1]); size events + 1.
  std::vector<size_t> begin;
};

// The step's stream, as the contract above states it. REQUIRES:
// ValidateTrace(trace).ok(); shape.counts and shape.pieces sized num_tensors().
StepStream DeriveStepEvents(const Trace& trace, const StepShape& shape);

}  // namespace tencache
