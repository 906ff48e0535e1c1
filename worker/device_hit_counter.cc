#include "worker/device_hit_counter.h"

#include <chrono>

#include "worker/shard_store.h"

namespace tencache {

DeviceHitCounter::DeviceHitCounter(TensorCache* cache, int blocks)
    : cache_(cache), arrivals_seen_(size_t(blocks), -1), refresh_(size_t(blocks)), refreshed_(size_t(blocks), false) {}

void DeviceHitCounter::OnDeviceAccess(int block, bool counted) {
  if (cache_ == nullptr) return;
  const int64_t arrivals = int64_t(cache_->Arrivals(ShardTensorId(block, ShardKind::kParam), Tier::kDevice));
  int64_t expected = arrivals_seen_[block];
  if (refreshed_[block]) {
    // The shard is on the device now, so a refresh that copied it has completed.
    if (refresh_[block].Wait(std::chrono::milliseconds(120000)).ok()) ++expected;
    refresh_[block] = PrefetchHandle();
    refreshed_[block] = false;
  }
  if (counted) {
    ++accesses_;
    if (arrivals_seen_[block] >= 0 && arrivals == expected) ++hits_;
  }
  arrivals_seen_[block] = arrivals;
}

void DeviceHitCounter::NoteRefresh(int block, PrefetchHandle refresh) {
  refresh_[block] = std::move(refresh);
  refreshed_[block] = true;
}

}  // namespace tencache
