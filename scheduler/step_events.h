// StepEvent: one event of a training step's per-access protocol — what the
// training thread does to the tiered store and when a device access's compute
// ends. The Trainer emits the stream (every training acquire, every stored
// gradient it consumes, every access end, in order); the Profiler keeps the
// access ends as the trace (scheduler/trace.h); the step protocol
// (scheduler/step_protocol.h) derives the whole stream back from a trace, and
// the simulator's host model and policies replay that stream. A test holds the
// worker's stream equal to the protocol's for the same trace.
// Plain values; thread-safe to read.
#pragma once

#include <cstdint>
#include <string>

#include "cachemgr/types.h"
#include "common/shard_bytes.h"
#include "scheduler/trace.h"

namespace tencache {

enum class StepEventKind : uint8_t {
  kAcquire,     // a shard piece acquired on a tier (the cache's acquire positions count these)
  kInvalidate,  // a stored gradient piece consumed: dropped without a write-back
  kAccessEnd,   // the compute of a device access of `block` in `phase` ended (a trace access)
};

struct StepEvent {
  StepEventKind kind = StepEventKind::kAcquire;
  int block = 0;
  // kAcquire, kInvalidate: which state of the block (common/shard_bytes.h
  // StateClass) and which of its pieces (0 for an unpieced state).
  int state = kStateParam;
  int piece = 0;
  Tier tier = Tier::kHost;              // kAcquire
  AccessMode mode = AccessMode::kRead;  // kAcquire
  Phase phase = Phase::kForward;        // kAccessEnd
  // kAccessEnd of a streamed update's part: its pieces [begin, end); 0, 0: all.
  int pieces_begin = 0, pieces_end = 0;

  static StepEvent Acquire(int block, int state, int piece, Tier tier, AccessMode mode) {
    StepEvent e;
    e.kind = StepEventKind::kAcquire;
    e.block = block;
    e.state = state;
    e.piece = piece;
    e.tier = tier;
    e.mode = mode;
    return e;
  }
  static StepEvent Invalidate(int block, int state, int piece) {
    StepEvent e;
    e.kind = StepEventKind::kInvalidate;
    e.block = block;
    e.state = state;
    e.piece = piece;
    return e;
  }
  static StepEvent AccessEnd(int block, Phase phase, int pieces_begin = 0, int pieces_end = 0) {
    StepEvent e;
    e.kind = StepEventKind::kAccessEnd;
    e.block = block;
    e.phase = phase;
    e.pieces_begin = pieces_begin;
    e.pieces_end = pieces_end;
    return e;
  }
  // Equal in every field that applies to the kind.
  bool operator==(const StepEvent& o) const {
    if (kind != o.kind || block != o.block) return false;
    switch (kind) {
      case StepEventKind::kAcquire:
        return state == o.state && piece == o.piece && tier == o.tier && mode == o.mode;
      case StepEventKind::kInvalidate:
        return state == o.state && piece == o.piece;
      case StepEventKind::kAccessEnd:
        return phase == o.phase && pieces_begin == o.pieces_begin && pieces_end == o.pieces_end;
    }
    return false;
  }
  bool operator!=(const StepEvent& o) const { return !(*this == o); }
};

// One line, e.g. "acquire block3.master[1] host write", "end block3 bwd".
inline std::string DescribeStepEvent(const StepEvent& e) {
  const std::string block = "block" + std::to_string(e.block);
  switch (e.kind) {
    case StepEventKind::kAcquire:
      return "acquire " + block + "." + StateClassName(e.state) + "[" + std::to_string(e.piece) + "] " +
             TierName(e.tier) + " " + AccessModeName(e.mode);
    case StepEventKind::kInvalidate:
      return "invalidate " + block + "." + StateClassName(e.state) + "[" + std::to_string(e.piece) + "]";
    case StepEventKind::kAccessEnd:
      return "end " + block + " " + PhaseName(e.phase) +
             (e.pieces_end > 0 ? " pieces [" + std::to_string(e.pieces_begin) + ", " +
                                     std::to_string(e.pieces_end) + ")"
                               : std::string());
  }
  return "?";
}

}  // namespace tencache
