#include "worker/zero_infinity_prefetcher.h"

#include <algorithm>

namespace tencache {

namespace {

std::vector<uint64_t> Elements(const std::vector<size_t>& shard_elems) {
  return std::vector<uint64_t>(shard_elems.begin(), shard_elems.end());
}

}  // namespace

// The cache's device tier as the coordinator sees it: a shard is on the device
// when the cache holds it there or a prefetch toward it is pending.
class ZeroInfinityPrefetcher::StoreView : public ZeroInfinityCacheView {
 public:
  StoreView(ZeroInfinityPrefetcher& p, ShardStore* store) : p_(p), store_(store), cache_(store->cache()) {}
  bool OnDevice(uint32_t b) const override { return Resident(b, Tier::kDevice) || InFlight(b); }
  bool InFlight(uint32_t b) const override {
    const std::optional<PrefetchHandle>& h = p_.fetches_[b];
    return h.has_value() && !h->ready();
  }
  bool OnlyOnNvme(uint32_t b) const override { return !Resident(b, Tier::kHost) && !OnDevice(b); }
  bool StartFetch(uint32_t b) override {
    p_.fetches_[b] = store_->Prefetch(int(b), ShardKind::kParam, 0, Tier::kDevice);
    return true;
  }
  uint64_t LiveElements() const override {
    uint64_t live = 0;
    for (size_t b = 0; b < p_.shard_elems_.size(); ++b) live += OnDevice(uint32_t(b)) ? p_.shard_elems_[b] : 0;
    return live;
  }

 private:
  bool Resident(uint32_t b, Tier tier) const { return cache_->IsResident(ShardTensorId(int(b), ShardKind::kParam), tier); }

  ZeroInfinityPrefetcher& p_;
  ShardStore* const store_;
  TensorCache* const cache_;
};

ZeroInfinityPrefetcher::ZeroInfinityPrefetcher(std::vector<size_t> shard_elems, ZeroInfinityKnobs knobs,
                                               ZeroInfinityCoordinator::Observer observer)
    : shard_elems_(std::move(shard_elems)),
      coordinator_(Elements(shard_elems_), knobs, std::move(observer)),
      fetches_(shard_elems_.size()) {}

void ZeroInfinityPrefetcher::BeginStep() { coordinator_.BeginStep(); }

Status ZeroInfinityPrefetcher::OnAccess(DeviceAccessIndex k, int block, ShardStore* store) {
  std::vector<int> still_pinned;
  for (int b : pending_release_) {
    if (b == block) continue;  // in use again: its next release decides
    const std::string why = "released after its use (retried at device access " + std::to_string(k.value()) + ")";
    TC_ASSIGN_OR_RETURN(const bool gone, EvictParamsFromDevice(store, b, why));
    if (!gone) still_pinned.push_back(b);
  }
  pending_release_.swap(still_pinned);
  StoreView view(*this, store);
  coordinator_.OnAccess(k.value(), uint32_t(block), view);
  return Status::Ok();
}

Status ZeroInfinityPrefetcher::AfterAccess(DeviceAccessIndex k, int block, ShardStore* store) {
  if (!coordinator_.ReleaseAfter(k.value(), uint32_t(block))) return Status::Ok();
  const std::string why = "released after device access " + std::to_string(k.value());
  TC_ASSIGN_OR_RETURN(const bool gone, EvictParamsFromDevice(store, block, why));
  if (!gone && std::find(pending_release_.begin(), pending_release_.end(), block) == pending_release_.end()) {
    pending_release_.push_back(block);
  }
  return Status::Ok();
}

int ZeroInfinityDriver::TakeFetchesIssued() {
  const int issued = prefetcher_.fetches_issued() - reported_;
  reported_ = prefetcher_.fetches_issued();
  return issued;
}

}  // namespace tencache
