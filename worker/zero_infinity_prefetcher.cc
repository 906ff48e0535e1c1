#include "worker/zero_infinity_prefetcher.h"

#include <algorithm>

namespace tencache {

ZeroInfinityPrefetcher::ZeroInfinityPrefetcher(std::vector<int> order, std::vector<size_t> shard_elems,
                                               ZeroInfinityKnobs knobs)
    : order_(std::move(order)), shard_elems_(std::move(shard_elems)), knobs_(knobs) {
  // Elements accessed between each access and the next use of the same block,
  // wrapping into the next step.
  const size_t n = order_.size();
  reuse_distance_.assign(n, UINT64_MAX);
  for (size_t i = 0; i < n; ++i) {
    uint64_t between = 0;
    for (size_t j = 1; j <= n; ++j) {
      const int b = order_[(i + j) % n];
      if (b == order_[i]) {
        reuse_distance_[i] = between;
        break;
      }
      between += shard_elems_[b];
    }
  }
}

void ZeroInfinityPrefetcher::BeginStep(int64_t step) {
  step_ = step;
  cursor_ = 0;
}

void ZeroInfinityPrefetcher::BeforeAccess(size_t k, ShardStore* store) {
  TensorCache* cache = store->cache();
  std::vector<int> still_pinned;
  for (int b : pending_release_) {
    if (!cache->Discard(ShardTensorId(b, ShardKind::kParam), Tier::kDevice).ok()) still_pinned.push_back(b);
  }
  pending_release_.swap(still_pinned);
  if (!complete()) return;
  while (!in_flight_.empty() && in_flight_.front().ready()) in_flight_.pop_front();
  uint64_t prefetching = 0;
  size_t pos = std::max(cursor_, k + 1);
  for (; pos < order_.size() && prefetching < knobs_.prefetch_bucket_size; ++pos) {
    const int b = order_[pos];
    const TensorId id = ShardTensorId(b, ShardKind::kParam);
    if (cache->IsResident(id, Tier::kDevice)) continue;
    if (!cache->IsResident(id, Tier::kHost)) break;  // its only copy is on NVMe: the walk stops
    if (int(in_flight_.size()) >= knobs_.max_in_flight) break;
    in_flight_.push_back(store->Prefetch(b, ShardKind::kParam, Tier::kDevice));
    prefetching += shard_elems_[b];
    ++issued_;
  }
  cursor_ = pos;
}

void ZeroInfinityPrefetcher::AfterAccess(size_t k, ShardStore* store) {
  if (complete() && k < reuse_distance_.size() && reuse_distance_[k] <= knobs_.max_reuse_distance) return;
  const int b = order_[k % order_.size()];
  if (!store->cache()->Discard(ShardTensorId(b, ShardKind::kParam), Tier::kDevice).ok()) {
    pending_release_.push_back(b);
  }
}

}  // namespace tencache
