// HostTierModel: the worker's host tier as the simulator replays it — the same
// cache tensors, the same slot plan and the same victim rule as the TensorCache
// under the worker — so that the simulator reads and writes the NVMe bytes the
// worker does, when it does.
//
// * Tensors. Per trace tensor (one rank's parameter shard of a block, `bytes`
//   in the trace's dtype): the parameter, and its fp32 gradient and state
//   shards — the master in mixed precision, both moments — cut into pieces as
//   the worker cuts them (common/shard_bytes.h StatePiecesWithin, with the
//   largest tensor of a layer block, 1 .. last-1, as the limit).
// * Slots. The cache's plan for its host tier (TensorCache::Setup): PlanSlots,
//   kMaxResident, at least kWorkerHostSlotsPerClass slots of every size.
// * Order. A step's acquires and consumptions are the step protocol's stream
//   (scheduler/step_protocol.h) for the trace, each (block, state, piece)
//   named by its host tensor: the parameter for every acquire of the
//   parameter, on any tier.
// * Victims (used by SimContext::HostAcquire): the resident tensor of the
//   class whose next acquire is furthest, never one the acquire's caller still
//   holds; its slot is free once its last use has ended, and a dirty one is
//   written back to NVMe first (the cache's host-tier rule, docs/cachemgr.md).
//
// Immutable after Create; a Run keeps its residency in HostTierState.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cachemgr/step_order.h"
#include "cachemgr/types.h"
#include "common/status.h"
#include "scheduler/step_events.h"
#include "scheduler/step_protocol.h"
#include "scheduler/trace.h"

namespace tencache {

// One event of the step's stream with the host tensor it names (kAcquire,
// kInvalidate; 0 for kAccessEnd).
struct HostStepEvent {
  StepEvent event;
  uint32_t tensor = 0;
};

class HostTierModel {
 public:
  // ResourceExhausted (naming the need) when `host_budget` cannot hold the
  // least slots the worker's cache keeps. REQUIRES: ValidateTrace(trace).ok().
  static StatusOr<HostTierModel> Create(const Trace& trace, uint64_t host_budget);
  // The least host budget Create accepts for `trace` (and the worker's cache for its job).
  static uint64_t LeastBudget(const Trace& trace);

  size_t num_tensors() const { return bytes_.size(); }
  uint64_t bytes(uint32_t t) const { return bytes_[t]; }
  // The host tensor holding trace tensor `id`'s parameter: the first
  // num_params() host tensors are the parameters, in trace id order.
  uint32_t param(TensorId id) const { return uint32_t(id); }
  size_t num_params() const { return params_; }
  // The stream's events of trace event `event`: an access's acquires before
  // its AccessEnd, the AccessEnd, and the gradient stores and writes that
  // follow it (none for a collective).
  const HostStepEvent* events_begin(size_t event) const { return stream_.data() + begin_[event]; }
  const HostStepEvent* events_end(size_t event) const { return stream_.data() + begin_[event + 1]; }
  // The acquires of every part of `id`'s update, in the worker's order.
  std::vector<HostStepEvent> update(TensorId id) const;
  const StepShape& shape() const { return shape_; }
  // State pieces of `id` (the update's pieces).
  int pieces(TensorId id) const { return shape_.pieces[id]; }
  // Acquires per step.
  uint64_t step_acquires() const { return order_.size(); }
  // The first acquire of `t` strictly after global position `pos` (acquire k of
  // step s is s * step_acquires() + k); kNeverAcquired when a step never acquires it.
  AcquireIndex NextUse(uint32_t t, AcquireIndex pos) const { return order_.NextUse(t, pos); }
  size_t num_classes() const { return slots_.size(); }
  int size_class(uint32_t t) const { return class_[t]; }
  uint64_t slots(int size_class) const { return slots_[size_class]; }
  const std::vector<uint32_t>& members(int size_class) const { return members_[size_class]; }
  // The bytes of every tensor (as the worker's cache registers them): what the
  // slot plan is made from.
  const std::vector<uint64_t>& all_bytes() const { return bytes_; }
  // One line: tensors, classes, slots and bytes of the plan.
  std::string Describe() const;

 private:
  static HostTierModel Tensors(const Trace& trace);  // everything but the plan

  std::vector<uint64_t> bytes_;
  size_t params_ = 0;
  std::vector<int> class_;
  std::vector<uint64_t> slots_;
  std::vector<std::vector<uint32_t>> members_;
  StepShape shape_;
  std::vector<HostStepEvent> stream_;  // the step protocol's stream
  std::vector<size_t> begin_;          // per trace event: its first event in stream_ (StepStream::begin)
  StepOrder<AcquireIndex> order_;  // the step's acquires
  uint64_t slot_bytes_ = 0;
};

// One Run's host residency (SimContext owns it).
struct HostTierState {
  std::vector<bool> resident, dirty;
  std::vector<double> ready_at;  // when the tensor's bytes are in its host slot
  std::vector<double> free_at;   // when its latest use ends: its slot's earliest reuse
  std::vector<uint64_t> used;    // slots in use per size class
  uint64_t pos = 0;              // acquires so far (global position)
};

}  // namespace tencache
