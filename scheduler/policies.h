// The cache policies the simulator compares, all driven through SimPolicy:
//   tencache       the plan: Belady residency, fetches issued as early as the
//                  space allows, never ahead of an all-gather on a shared lane
//   belady         offline optimal for hits: evict furthest next use, fetch on demand
//   lru            evict least recently used, fetch on demand
//   zero-infinity  DeepSpeed's PartitionedParameterCoordinator with its defaults
//   10cache-window the 10Cache paper's sliding window over the profiled order
// Each policy object serves one CacheSimulator::Run; not thread-safe.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cachemgr/types.h"
#include "common/status.h"
#include "scheduler/sim_engine.h"
#include "scheduler/zero_infinity_coordinator.h"

namespace tencache {

std::vector<std::string> PolicyNames();
// NotFound naming the policy and the known ones.
StatusOr<std::unique_ptr<SimPolicy>> MakePolicy(std::string_view name);
// The ZeroInfinityCoordinator over the simulated cache; `observer` sees its decisions.
std::unique_ptr<SimPolicy> MakeZeroInfinityPolicy(const ZeroInfinityKnobs& knobs,
                                                  ZeroInfinityCoordinator::Observer observer = {});

// Resident tensors ordered by a key (next use, last use, ...). O(log n) updates.
class KeyedResidents {
 public:
  explicit KeyedResidents(size_t num_tensors) : key_(num_tensors, 0), in_(num_tensors, false) {}
  void Set(TensorId id, uint64_t key);
  void Erase(TensorId id);
  bool contains(TensorId id) const { return in_[id]; }
  bool empty() const { return set_.empty(); }
  // REQUIRES: !empty().
  TensorId Smallest() const { return set_.begin()->second; }
  TensorId Largest() const { return std::prev(set_.end())->second; }
  void Clear();

 private:
  std::set<std::pair<uint64_t, TensorId>> set_;
  std::vector<uint64_t> key_;
  std::vector<bool> in_;
};

// Evicts from `keyed` (largest key first when `largest`, else smallest) until
// `id` fits, skipping `id` itself. Removes evicted tensors from `keyed`.
void EvictUntilFits(TensorId id, bool largest, KeyedResidents& keyed, SimContext& s);

}  // namespace tencache
