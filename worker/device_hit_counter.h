// DeviceHitCounter: device hits as tencache-sim counts them, for
// StepMetrics::device_hit_rate. An access is a hit when its block's parameter
// shard stayed on the device since the block's previous access: the cache
// counts the copies that arrived on the device, and between two accesses none
// may have, except the optimizer's refresh of a shard that was on the device at
// its update (the simulator's update in place), when that refresh is what
// brought it. Training thread only.
#pragma once

#include <cstdint>
#include <vector>

#include "cachemgr/tensor_cache.h"

namespace tencache {

class DeviceHitCounter {
 public:
  // `cache`: the store's cache, nullptr for the reference store (then nothing
  // is counted). REQUIRES: `cache` outlives this.
  DeviceHitCounter(TensorCache* cache, int blocks);

  // `block`'s parameter shard was just acquired on the device. `counted`: a
  // training access; an evaluation's or sampling's moves the baseline only.
  void OnDeviceAccess(int block, bool counted);
  // The optimizer's update of `block` copies its shard back to the device.
  void NoteRefresh(int block, PrefetchHandle refresh);
  // Hits and accesses counted since the previous call.
  uint64_t hits() const { return hits_; }
  uint64_t accesses() const { return accesses_; }
  void Reset() { hits_ = accesses_ = 0; }

 private:
  TensorCache* const cache_;
  std::vector<int64_t> arrivals_seen_;   // per block: device arrivals at its last access, -1: none
  std::vector<PrefetchHandle> refresh_;  // per block: the optimizer's refresh since then
  std::vector<bool> refreshed_;
  uint64_t hits_ = 0, accesses_ = 0;
};

}  // namespace tencache
