#include "worker/prefetch_driver.h"

#include "worker/planned_prefetch.h"
#include "worker/zero_infinity_prefetcher.h"

namespace tencache {
namespace {

// lru and none: the cache fetches on a miss and evicts by its own rule.
class DemandOnly : public PrefetchDriver {
 public:
  const char* name() const override { return "demand-only"; }
};

}  // namespace

StatusOr<bool> EvictParamsFromDevice(ShardStore* store, int block, const std::string& why) {
  StatusOr<TensorCache::Discarded> discarded =
      store->cache()->Discard(ShardTensorId(block, ShardKind::kParam), Tier::kDevice);
  if (!discarded.ok()) {
    return discarded.status().WithContext("evicting block " + std::to_string(block) +
                                          "'s parameters from the device " + why);
  }
  return *discarded == TensorCache::Discarded::kGone;
}

std::unique_ptr<PrefetchDriver> MakePrefetchDriver(PrefetchDriverContext context) {
  const CachePolicy policy = context.job->cache.policy;
  if (context.store->cache() == nullptr) return std::make_unique<DemandOnly>();
  if (policy == CachePolicy::kTencache) return std::make_unique<PlannedPrefetch>(std::move(context));
  if (policy == CachePolicy::kZeroInfinity) {
    return std::make_unique<ZeroInfinityDriver>(context.layout->counts, context.store);
  }
  return std::make_unique<DemandOnly>();
}

}  // namespace tencache
