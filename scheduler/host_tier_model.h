// HostTierModel: the worker's host tier as the simulator replays it — the same
// cache tensors, the same slot plan and the same victim rule as the TensorCache
// under the worker — so that the simulator reads and writes the NVMe bytes the
// worker does, when it does (issue #15 item 1).
//
// * Tensors. Per trace tensor (one rank's parameter shard of a block, `bytes`
//   in the trace's dtype): the parameter, and its fp32 gradient and state
//   shards — the master in mixed precision, both moments — cut into pieces as
//   the worker cuts them (common/shard_bytes.h StatePiecesWithin, with the
//   largest tensor of a layer block, 1 .. last-1, as the limit).
// * Slots. The cache's plan for its host tier (TensorCache::Setup): PlanSlots,
//   kMaxResident, at least kWorkerHostSlotsPerClass slots of every size.
// * Order. A step's acquires, as the worker makes them: each device access
//   acquires its parameter; a backward access that is not its tensor's last
//   before its update (accumulation over micro-batches) stores the gradient's
//   pieces (the first overwrites them, later ones add in), and one after its
//   update (the tied embedding's lookup: the worker's split update holds its
//   rows apart) stores nothing; each update reads a stored
//   gradient's pieces and drops them (consumed: never written back), then
//   acquires, per piece, [master,] m and v, and the parameter (fp32: first,
//   read and written, held throughout; mixed precision: after the first piece,
//   overwritten without a read). Traces do not say whether a run defers its
//   updates (grad_clip, fp16), which stores every gradient: the model takes it
//   that it does not.
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
#include "scheduler/trace.h"

namespace tencache {

enum class HostUse : uint8_t {
  kRead,       // read (from NVMe when not resident), left clean
  kWrite,      // read and modified: dirty afterwards
  kOverwrite,  // written whole without a read: dirty afterwards
};

struct HostAcquire {
  uint32_t tensor = 0;
  HostUse use = HostUse::kRead;
  int piece = 0;         // the state piece it belongs to (the parameter: 0; a stored gradient's: -1)
  bool consume = false;  // dropped after this use: its slot is freed without a write-back
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
  // The acquires of `id`'s update, in the worker's order.
  const std::vector<HostAcquire>& update(TensorId id) const { return update_[id]; }
  // Whether update acquire `a` is made by optimizer access `e`, which may
  // update only some pieces (TraceEvent::pieces_begin/end): a stored
  // gradient's pieces go with the part that starts at piece 0.
  static bool InPart(const HostAcquire& a, const TraceEvent& e) {
    if (e.pieces_end == 0) return true;
    if (a.piece < 0) return e.pieces_begin == 0;
    return a.piece >= e.pieces_begin && a.piece < e.pieces_end;
  }
  // The acquires after trace event `event`'s compute (a backward access storing
  // its gradient; empty for every other event).
  const std::vector<HostAcquire>& after_access(size_t event) const { return after_[event]; }
  // State pieces of `id` (the update's pieces).
  int pieces(TensorId id) const { return pieces_[id]; }
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
  std::vector<int> pieces_;
  std::vector<std::vector<HostAcquire>> update_;
  std::vector<std::vector<HostAcquire>> after_;
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
