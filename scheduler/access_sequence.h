// AccessSequence: the device accesses of one profiled step, indexed for the
// questions a cache asks — when is this tensor next used, when was it last
// used, how many bytes are touched in between.
//
// Steps repeat: device access k of step s has the global DeviceAccessIndex
// s·size() + k, and every query answers in global indices (the next-use lookup
// is cachemgr's StepOrder over the device accesses). Built once from a validated Trace; immutable
// afterwards and safe to share across threads. Queries are O(log uses of that
// tensor).
#pragma once

#include <cstdint>
#include <vector>

#include "cachemgr/step_order.h"
#include "cachemgr/types.h"
#include "common/status.h"
#include "scheduler/trace.h"

namespace tencache {

// How many device accesses ahead of the device the host tier stages
// parameters: as access k-1 is released, the worker (and tencache-sim's
// tencache policy) issues the device fetches planned before access k and reads
// to the host each parameter that the fetches planned before access
// k + kHostTierLead will copy and that is only on NVMe, so that NVMe read is
// off the later fetch's critical path. The cache gives such a read the victim
// a demand miss would take and parks it until that victim's last use.
constexpr uint64_t kHostTierLead = 1;

class AccessSequence {
 public:
  // Keeps the forward and backward accesses of `trace`, in order.
  static StatusOr<AccessSequence> FromTrace(const Trace& trace);

  size_t size() const { return order_.size(); }  // device accesses per step
  size_t num_tensors() const { return bytes_.size(); }
  TensorId tensor(DeviceAccessIndex k) const { return order_.tensor(k); }
  uint64_t bytes(TensorId id) const { return bytes_[id]; }
  // Compute seconds that follow access k (its duration in the trace).
  double compute_s(DeviceAccessIndex k) const { return compute_[k.in_step(size())]; }
  const std::vector<uint64_t>& all_bytes() const { return bytes_; }
  // Tensors that the step never accesses on the device (optimizer-only).
  bool used(TensorId id) const { return order_.used(id); }

  // First access of `id` strictly after global index `g`, or kNeverAccessed.
  DeviceAccessIndex NextUse(TensorId id, DeviceAccessIndex g) const { return order_.NextUse(id, g); }
  // Last access of `id` strictly before `g`, or kNeverAccessed.
  DeviceAccessIndex PrevUse(TensorId id, DeviceAccessIndex g) const { return order_.PrevUse(id, g); }
  // Bytes touched by the accesses strictly between global indices a < b.
  uint64_t BytesBetween(DeviceAccessIndex a, DeviceAccessIndex b) const;

 private:
  StepOrder<DeviceAccessIndex> order_;
  std::vector<uint64_t> bytes_;
  std::vector<double> compute_;
  std::vector<uint64_t> prefix_;             // prefix_[k]: bytes of accesses 0..k-1
};

}  // namespace tencache
