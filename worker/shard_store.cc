#include "worker/shard_store.h"

#include "cachemgr/device_tier.h"
#include "cachemgr/host_tier.h"
#include "cachemgr/nvme_tier.h"

namespace tencache {

const char* ShardKindName(ShardKind kind) {
  static const char* kNames[] = {"param", "grad", "adam_m", "adam_v"};
  return kNames[int(kind)];
}

namespace {

class MemoryShardStore : public ShardStore {
 public:
  explicit MemoryShardStore(const std::vector<size_t>& counts) {
    size_t total = 0;
    for (size_t c : counts) {
      for (int k = 0; k < kShardKinds; ++k) {
        offsets_.push_back(total);
        total += c;
      }
      counts_.push_back(c);
    }
    arena_.assign(total, 0.0f);  // the one allocation
  }
  std::string Describe() const override { return "memory (cache.policy none: every shard in ordinary memory)"; }
  StatusOr<ShardRef> Acquire(int block, ShardKind kind, Tier, AccessMode) override {
    return ShardRef(arena_.data() + offsets_[ShardTensorId(block, kind)], counts_[block]);
  }
  PrefetchHandle Prefetch(int, ShardKind, Tier) override { return {}; }
  void Invalidate(int, ShardKind) override {}
  CacheMetrics EndStep() override {
    CacheMetrics m;
    m.step = step_++;
    m.tier(Tier::kHost).reserved_bytes = m.tier(Tier::kHost).used_bytes = m.tier(Tier::kHost).peak_used_bytes =
        arena_.size() * sizeof(float);
    return m;
  }
  TensorCache* cache() override { return nullptr; }

 private:
  std::vector<float> arena_;
  std::vector<size_t> offsets_;
  std::vector<size_t> counts_;
  uint64_t step_ = 0;
};

class CachedShardStore : public ShardStore {
 public:
  CachedShardStore(std::unique_ptr<TensorCache> cache, std::vector<size_t> counts)
      : cache_(std::move(cache)), counts_(std::move(counts)) {}
  std::string Describe() const override { return cache_->Describe(); }
  StatusOr<ShardRef> Acquire(int block, ShardKind kind, Tier tier, AccessMode mode) override {
    TC_ASSIGN_OR_RETURN(TensorHandle h,
                        cache_->Acquire(ShardTensorId(block, kind), tier, mode, std::chrono::milliseconds(120000)));
    float* data = static_cast<float*>(h.data());
    return ShardRef(data, counts_[block], std::move(h));
  }
  PrefetchHandle Prefetch(int block, ShardKind kind, Tier tier) override {
    return cache_->Prefetch(ShardTensorId(block, kind), tier);
  }
  void Invalidate(int block, ShardKind kind) override {
    // Unpinned by now (the caller released it); a failure only means a write-back may happen.
    (void)cache_->Invalidate(ShardTensorId(block, kind));
  }
  CacheMetrics EndStep() override { return cache_->EndStep(); }
  TensorCache* cache() override { return cache_.get(); }

 private:
  std::unique_ptr<TensorCache> cache_;
  std::vector<size_t> counts_;
};

}  // namespace

std::unique_ptr<ShardStore> MakeMemoryShardStore(const std::vector<size_t>& shard_counts) {
  return std::make_unique<MemoryShardStore>(shard_counts);
}

StatusOr<std::unique_ptr<ShardStore>> MakeCachedShardStore(const std::vector<size_t>& counts,
                                                           const CachedStoreOptions& o) {
  std::vector<TensorSpec> specs;
  for (size_t b = 0; b < counts.size(); ++b) {
    for (int k = 0; k < kShardKinds; ++k) {
      TensorSpec s;
      s.id = ShardTensorId(int(b), ShardKind(k));
      s.name = "block" + std::to_string(b) + "." + ShardKindName(ShardKind(k));
      s.bytes = counts[b] * sizeof(float);
      s.dtype = ElementType::kFloat32;
      s.home = Tier::kNvme;  // everything starts on NVMe; the plan pulls it up
      s.device = ShardKind(k) == ShardKind::kParam;  // gradients and moments live on host and NVMe
      specs.push_back(s);
    }
  }
  TierSet tiers;
  TC_ASSIGN_OR_RETURN(tiers.device, MakeDeviceTier(o.cuda ? DeviceBackend::kCuda : DeviceBackend::kSimulatedHost));
  tiers.host = std::make_unique<HostTier>();
  NvmeTierOptions nvme;
  nvme.dir = o.nvme_dir;
  nvme.rank = o.rank;
  TC_ASSIGN_OR_RETURN(tiers.nvme, NvmeTier::Open(nvme));
  TensorCacheOptions options;
  options.device_budget = o.device_budget;
  options.host_budget = o.host_budget;
  // The trainer pins at most one parameter shard per size class on the device
  // (the head's two blocks differ in size) and three shards of a block on the
  // host (an update: parameter and moments; a stored gradient is released
  // before). Budgets are hard: a prefetch that finds no free slot fails and the
  // shard is fetched when it is acquired instead.
  options.min_device_slots_per_class = 1;
  options.min_host_slots_per_class = 3;
  options.grow_when_pinned = false;
  TC_ASSIGN_OR_RETURN(std::unique_ptr<TensorCache> cache, TensorCache::Create(options, specs, std::move(tiers)));
  return std::unique_ptr<ShardStore>(std::make_unique<CachedShardStore>(std::move(cache), counts));
}

}  // namespace tencache
