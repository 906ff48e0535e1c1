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
  std::vector<ShardKind> k;
  for (ShardKind kind : {ShardKind::kParam, ShardKind::kGrad, ShardKind::kAdamM, ShardKind::kAdamV, ShardKind::kMaster})
    if (ElementBytes(kind) > 0) k.push_back(kind);  // no master in fp32
  return k;
}

size_t ShardLayout::PieceBegin(int block, ShardKind kind, int piece) const {
  return size_t(StatePieceBegin(counts[size_t(block)], Pieces(block, kind), piece));
}

size_t ShardLayout::PieceCount(int block, ShardKind kind, int piece) const {
  return size_t(StatePieceElements(counts[size_t(block)], Pieces(block, kind), piece));
}

namespace {

// Index of a cut kind among the block's further pieces.
int CutIndex(ShardKind kind) { return kind == ShardKind::kMaster ? 3 : int(kind) - 1; }

}  // namespace

// Tensor ids of the further pieces (piece >= 1) of blocks before `block`: the
// first pieces' ids (masters included) come before them all.
size_t ShardLayout::FurtherPiecesBefore(int block) const {
  const size_t cut = mixed ? 4 : 3;  // kinds with pieces: gradient, moments[, master]
  size_t n = num_blocks() * (kShardKinds + (mixed ? 1 : 0));
  for (int b = 0; b < block; ++b) n += size_t(Pieces(b, ShardKind::kGrad) - 1) * cut;
  return n;
}

TensorId ShardLayout::Id(int block, ShardKind kind, int piece) const {
  if (piece == 0) return kind == ShardKind::kMaster ? TensorId(kShardKinds * num_blocks() + block) : ShardTensorId(block, kind);
  const size_t further = size_t(Pieces(block, kind) - 1);
  return TensorId(FurtherPiecesBefore(block) + size_t(CutIndex(kind)) * further + size_t(piece - 1));
}

size_t ShardLayout::num_tensors() const { return FurtherPiecesBefore(int(num_blocks())); }

ShardLayout MakeShardLayout(const std::vector<uint64_t>& block_numel, int layers, DType dtype, int ranks) {
  ShardLayout l;
  l.mixed = dtype != DType::kFp32;
  l.fp16 = dtype == DType::kFp16;
  std::vector<uint64_t> counts;
  for (uint64_t n : block_numel) counts.push_back((n + uint64_t(ranks) - 1) / uint64_t(ranks));
  l.counts.assign(counts.begin(), counts.end());
  l.pieces = StatePieces(counts, layers, dtype);
  return l;
}

namespace {

class MemoryShardStore : public ShardStore {
 public:
  explicit MemoryShardStore(const ShardLayout& layout) : layout_(layout) {
    offsets_.assign(layout.num_tensors(), 0);
    size_t total = 0;  // bytes, each shard 64-byte aligned, its pieces one after the other
    for (int b = 0; b < int(layout.num_blocks()); ++b) {
      for (ShardKind k : layout.Kinds()) {
        for (int i = 0; i < layout.Pieces(b, k); ++i) {
          offsets_[layout.Id(b, k, i)] = total + layout.PieceBegin(b, k, i) * layout.ElementBytes(k);
        }
        total += (layout.Bytes(b, k) + 63) / 64 * 64;
      }
    }
    arena_.assign(total / sizeof(float), 0.0f);  // the one allocation
  }
  std::string Describe() const override { return "memory (cache.policy none: every shard in ordinary memory)"; }
  const ShardLayout& layout() const override { return layout_; }
  StatusOr<ShardRef> Acquire(int block, ShardKind kind, int piece, Tier, AccessMode) override {
    return ShardRef(reinterpret_cast<uint8_t*>(arena_.data()) + offsets_[layout_.Id(block, kind, piece)],
                    layout_.PieceCount(block, kind, piece));
  }
  PrefetchHandle Prefetch(int, ShardKind, int, Tier) override { return {}; }
  void Invalidate(int, ShardKind, int) override {}
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
  StatusOr<ShardRef> Acquire(int block, ShardKind kind, int piece, Tier tier, AccessMode mode) override {
    TC_ASSIGN_OR_RETURN(TensorHandle h, cache_->Acquire(layout_.Id(block, kind, piece), tier, mode,
                                                        std::chrono::milliseconds(120000)));
    void* data = h.data();
    return ShardRef(data, layout_.PieceCount(block, kind, piece), std::move(h));
  }
  PrefetchHandle Prefetch(int block, ShardKind kind, int piece, Tier tier) override {
    return cache_->Prefetch(layout_.Id(block, kind, piece), tier);
  }
  void Invalidate(int block, ShardKind kind, int piece) override {
    // Unpinned by now (the caller released it); a failure only means a write-back may happen.
    (void)cache_->Invalidate(layout_.Id(block, kind, piece));
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
      const int pieces = layout.Pieces(b, k);
      for (int i = 0; i < pieces; ++i) {
        TensorSpec& s = specs[layout.Id(b, k, i)];
        s.id = layout.Id(b, k, i);
        s.name = "block" + std::to_string(b) + "." + ShardKindName(k) +
                 (pieces > 1 ? "." + std::to_string(i) : std::string());
        s.bytes = layout.PieceCount(b, k, i) * layout.ElementBytes(k);
        s.dtype = layout.ElementBytes(k) != 2 ? ElementType::kFloat32
                  : layout.fp16             ? ElementType::kFloat16
                                            : ElementType::kBFloat16;
        s.home = Tier::kNvme;  // everything starts on NVMe; the plan pulls it up
        s.device = DeviceTierHolds(ShardKindClass(k));  // the parameters; the rest live on host and NVMe
      }
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
  options.device_budget_key = "cache.device_budget";
  // The trainer pins at most one parameter shard per size class on the device
  // (the head's two blocks differ in size) and three of one size on the host
  // (an update: a piece of the master or the parameter, and of both moments; a
  // stored gradient is released before; a mixed-precision parameter, pinned
  // beside them to be written, is of another size: StatePieces). Budgets are
  // hard: a prefetch that finds no free slot fails and the shard is fetched
  // when it is acquired instead.
  options.min_device_slots_per_class = 1;
  options.min_host_slots_per_class = kWorkerHostSlotsPerClass;
  options.grow_when_pinned = false;
  StatusOr<std::unique_ptr<TensorCache>> cache = TensorCache::Create(options, specs, std::move(tiers));
  if (!cache.ok()) return cache.status().WithContext("rank " + std::to_string(o.rank) + "'s shards");
  return std::unique_ptr<ShardStore>(std::make_unique<CachedShardStore>(std::move(*cache), layout));
}

}  // namespace tencache
