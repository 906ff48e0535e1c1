// ZeroInfinityPrefetcher: the ZeroInfinityCoordinator (DeepSpeed ZeRO-3's
// PartitionedParameterCoordinator, scheduler/zero_infinity_coordinator.h) driving
// the real tensor cache through a ShardStore, so that `cache.policy:
// zero-infinity` is the baseline measured side by side with tencache; tencache-sim
// adapts the same coordinator to its simulated cache.
//
// Keys are blocks; the tensor of block b is its parameter shard. The coordinator
// records step 0's accesses and prefetches from step 1. A shard the coordinator
// releases while it is still pinned is evicted from the device at the next
// access instead (EvictParamsFromDevice, worker/prefetch_driver.h: a failed
// write-back fails the access). Eviction, when a fetch needs room, is the
// cache's own. Used by the training thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "scheduler/zero_infinity_coordinator.h"
#include "worker/prefetch_driver.h"
#include "worker/shard_store.h"

namespace tencache {

class ZeroInfinityPrefetcher {
 public:
  // `shard_elems[b]`: parameters in block b's shard.
  explicit ZeroInfinityPrefetcher(std::vector<size_t> shard_elems, ZeroInfinityKnobs knobs = {},
                                  ZeroInfinityCoordinator::Observer observer = {});

  // Before the step's first access.
  void BeginStep();
  // Device access k of the step (0, 1, ...) uses `block`'s parameter shard, which
  // the caller has just acquired on the device: the walk that prefetches.
  // REQUIRES: store->cache() != nullptr.
  Status OnAccess(DeviceAccessIndex k, int block, ShardStore* store);
  // After device access k computed: the release-after-use rule.
  Status AfterAccess(DeviceAccessIndex k, int block, ShardStore* store);
  int fetches_issued() const { return int(coordinator_.fetches_issued()); }
  const ZeroInfinityCoordinator& coordinator() const { return coordinator_; }

 private:
  class StoreView;

  const std::vector<size_t> shard_elems_;
  ZeroInfinityCoordinator coordinator_;
  std::vector<std::optional<PrefetchHandle>> fetches_;  // per block: its latest prefetch
  std::vector<int> pending_release_;                     // released while still pinned: retried later
};

// The zero-infinity policy's PrefetchDriver: a ZeroInfinityPrefetcher over the
// training thread's device accesses. REQUIRES: store->cache() != nullptr.
class ZeroInfinityDriver : public PrefetchDriver {
 public:
  ZeroInfinityDriver(std::vector<size_t> shard_elems, ShardStore* store)
      : prefetcher_(std::move(shard_elems)), store_(store) {}
  const char* name() const override { return "zero-infinity"; }
  void BeginStep() override { prefetcher_.BeginStep(); }
  // DeepSpeed prefetches once the current parameters are there.
  Status OnAccess(DeviceAccessIndex k, int block) override { return prefetcher_.OnAccess(k, block, store_); }
  Status AfterAccess(DeviceAccessIndex k, int block) override { return prefetcher_.AfterAccess(k, block, store_); }
  int TakeFetchesIssued() override;

 private:
  ZeroInfinityPrefetcher prefetcher_;
  ShardStore* const store_;
  int reported_ = 0;  // prefetcher_'s fetches counted by TakeFetchesIssued so far
};

}  // namespace tencache
