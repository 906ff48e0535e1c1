// ZeroInfinityPrefetcher: DeepSpeed ZeRO-3's PartitionedParameterCoordinator
// driving the real tensor cache, so that `cache.policy: zero-infinity` is the
// baseline measured side by side with tencache (tencache-sim models the same
// semantics; see scheduler/policy_zero_infinity.cc).
//
// Its trace is INVALID in step 0, RECORD in step 1 and COMPLETE from step 2:
// before that every shard is fetched on demand. Then, before each device
// access, it walks the recorded order from where it stopped and prefetches
// parameter shards not on the device while the prefetched elements stay under
// prefetch_bucket_size, stopping at the first shard whose only copy is on NVMe
// and while max_in_flight fetches are pending. After each access a shard is
// released from the device unless the elements accessed before its next use
// stay within max_reuse_distance. Eviction is the cache's LRU (no next-use
// oracle). Used by the training thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "scheduler/policies.h"
#include "worker/shard_store.h"

namespace tencache {

class ZeroInfinityPrefetcher {
 public:
  // `order`: the block of each device access of a step, as profiled;
  // `shard_elems[b]`: parameters in block b's shard.
  ZeroInfinityPrefetcher(std::vector<int> order, std::vector<size_t> shard_elems, ZeroInfinityKnobs knobs = {});

  void BeginStep(int64_t step);
  // Before device access k of the step. REQUIRES: store->cache() != nullptr.
  void BeforeAccess(size_t k, ShardStore* store);
  // After device access k: the release-after-use rule.
  void AfterAccess(size_t k, ShardStore* store);
  int fetches_issued() const { return issued_; }

 private:
  bool complete() const { return step_ >= knobs_.trace_complete_step; }

  const std::vector<int> order_;
  const std::vector<size_t> shard_elems_;
  const ZeroInfinityKnobs knobs_;
  std::vector<uint64_t> reuse_distance_;  // per position: elements accessed before the next use
  int64_t step_ = 0;
  size_t cursor_ = 0;                    // where the walk stopped in this step
  std::deque<PrefetchHandle> in_flight_;
  std::vector<int> pending_release_;     // released while still pinned: retried later
  int issued_ = 0;
};

}  // namespace tencache
