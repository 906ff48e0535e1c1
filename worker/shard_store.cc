#include "worker/shard_store.h"

#include "cachemgr/device_tier.h"
#include "cachemgr/host_tier.h"
#include "cachemgr/nvme_tier.h"
#include "common/shard_bytes.h"

namespace tencache {

const char* ShardKindName(ShardKind kind) {
  static const char* kNames[] = {"param", "grad", "adam_m", "adam_v", "master"};
  return kNames[int(kind)];
}

std::vector<ShardKind> ShardLayout::Kinds() const {
  std::vector<ShardKind> k = {ShardKind::kParam, ShardKind::kGrad, ShardKind::kAdamM, ShardKind::kAdamV};
  if (mixed) k.push_back(ShardKind::kMaster);
  return k;
}

namespace {

class MemoryShardStore : public ShardStore {
 public:
  explicit MemoryShardStore(const ShardLayout& layout) : layout_(layout) {
    offsets_.assign(layout.num_tensors(), 0);
    size_t total = 0;  // bytes, each shard 64-byte aligned
    for (int b = 0; b < int(layout.num_blocks()); ++b) {
      for (ShardKind k : layout.Kinds()) {
        offsets_[layout.Id(b, k)] = total;
        total += (layout.Bytes(b, k) + 63) / 64 * 64;
      }
    }
    arena_.assign(total / sizeof(float), 0.0f);  // the one allocation
  }
  std::string Describe() const override { return "memory (cache.policy none: every shard in ordinary memory)"; }
  const ShardLayout& layout() const override { return layout_; }
  StatusOr<ShardRef> Acquire(int block, ShardKind kind, Tier, AccessMode) override {
    return ShardRef(reinterpret_cast<uint8_t*>(arena_.data()) + offsets_[layout_.Id(block, kind)],
                    layout_.counts[block]);
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
  const ShardLayout layout_;
  std::vector<float> arena_;
  std::vector<size_t> offsets_;  // bytes, per tensor id
  uint64_t step_ = 0;
};

class CachedShardStore : public ShardStore {
 public:
  CachedShardStore(std::unique_ptr<TensorCache> cache, const ShardLayout& layout)
      : cache_(std::move(cache)), layout_(layout) {}
  std::string Describe() const override { return cache_->Describe(); }
  const ShardLayout& layout() const override { return layout_; }
  StatusOr<ShardRef> Acquire(int block, ShardKind kind, Tier tier, AccessMode mode) override {
    TC_ASSIGN_OR_RETURN(TensorHandle h,
                        cache_->Acquire(layout_.Id(block, kind), tier, mode, std::chrono::milliseconds(120000)));
    void* data = h.data();
    return ShardRef(data, layout_.counts[block], std::move(h));
  }
  PrefetchHandle Prefetch(int block, ShardKind kind, Tier tier) override {
    return cache_->Prefetch(layout_.Id(block, kind), tier);
  }
  void Invalidate(int block, ShardKind kind) override {
    // Unpinned by now (the caller released it); a failure only means a write-back may happen.
    (void)cache_->Invalidate(layout_.Id(block, kind));
  }
  CacheMetrics EndStep() override { return cache_->EndStep(); }
  TensorCache* cache() override { return cache_.get(); }

 private:
  std::unique_ptr<TensorCache> cache_;
  const ShardLayout layout_;
};

}  // namespace

std::unique_ptr<ShardStore> MakeMemoryShardStore(const ShardLayout& layout) {
  return std::make_unique<MemoryShardStore>(layout);
}

StatusOr<std::unique_ptr<ShardStore>> MakeCachedShardStore(const ShardLayout& layout, const CachedStoreOptions& o) {
  std::vector<TensorSpec> specs(layout.num_tensors());
  for (int b = 0; b < int(layout.num_blocks()); ++b) {
    for (ShardKind k : layout.Kinds()) {
      TensorSpec& s = specs[layout.Id(b, k)];
      s.id = layout.Id(b, k);
      s.name = "block" + std::to_string(b) + "." + ShardKindName(k);
      s.bytes = layout.Bytes(b, k);
      s.dtype = layout.ElementBytes(k) != 2 ? ElementType::kFloat32
                : layout.fp16             ? ElementType::kFloat16
                                          : ElementType::kBFloat16;
      s.home = Tier::kNvme;  // everything starts on NVMe; the plan pulls it up
      s.device = k == ShardKind::kParam;  // gradients, moments and masters live on host and NVMe
    }
  }
  TierSet tiers;
  TC_ASSIGN_OR_RETURN(tiers.device, MakeDeviceTier(o.cuda ? DeviceBackend::kCuda : DeviceBackend::kSimulatedHost,
                                                   o.cuda_device));
  // On a GPU, page-locked for its DMA: H2D and D2H at full speed, asynchronous.
  tiers.host = std::make_unique<HostTier>(o.cuda ? CudaPinnedHostTierOptions() : HostTierOptions());
  NvmeTierOptions nvme;
  nvme.dir = o.nvme_dir;
  nvme.rank = o.rank;
  nvme.env = o.file_env;
  TC_ASSIGN_OR_RETURN(tiers.nvme, NvmeTier::Open(nvme));
  TensorCacheOptions options;
  options.device_budget = o.device_budget;
  options.host_budget = o.host_budget;
  options.nvme_budget = o.nvme_budget;
  options.nvme_budget_key = "cache.nvme_budget";
  options.host_budget_key = "cache.host_budget";
  // The trainer pins at most one parameter shard per size class on the device
  // (the head's two blocks differ in size) and three shards of a block on the
  // host (an update: parameter or master, and moments; a stored gradient is
  // released before; a mixed-precision parameter is written after, in its own
  // smaller class). Budgets are hard: a prefetch that finds no free slot fails
  // and the shard is fetched when it is acquired instead.
  options.min_device_slots_per_class = 1;
  options.min_host_slots_per_class = kWorkerHostSlotsPerClass;
  options.grow_when_pinned = false;
  StatusOr<std::unique_ptr<TensorCache>> cache = TensorCache::Create(options, specs, std::move(tiers));
  if (!cache.ok()) return cache.status().WithContext("rank " + std::to_string(o.rank) + "'s shards");
  return std::unique_ptr<ShardStore>(std::make_unique<CachedShardStore>(std::move(*cache), layout));
}

}  // namespace tencache
