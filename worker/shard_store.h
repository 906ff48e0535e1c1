// ShardStore: where this rank's shards of every block live — the parameter
// shard, its accumulated gradient and the two AdamW moments, each a flat fp32
// array of the block's shard length. The trainer reaches them only through
// Acquire, which returns a ShardRef pinning the data until it is destroyed.
//
// Two stores: the memory store (cache.policy none, the reference run) keeps
// every shard in one host allocation made at setup; the cached store registers
// each shard as a TensorCache tensor, so that shards move between the device,
// pinned host and NVMe tiers within the job's budgets. Both return identical
// bytes for identical writes, which is what makes a cached run bitwise equal to
// the reference. One thread (the training loop) uses a store; the cache's
// movers run behind it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cachemgr/tensor_cache.h"
#include "common/status.h"

namespace tencache {

enum class ShardKind : int { kParam = 0, kGrad = 1, kAdamM = 2, kAdamV = 3 };
constexpr int kShardKinds = 4;
const char* ShardKindName(ShardKind kind);
// The cache tensor id of a block's shard: 4 per block, in block order.
inline TensorId ShardTensorId(int block, ShardKind kind) { return TensorId(block * kShardKinds + int(kind)); }

// A pinned shard. Move-only; unpins when destroyed.
class ShardRef {
 public:
  ShardRef() = default;
  ShardRef(float* data, size_t count, TensorHandle handle = {})
      : data_(data), count_(count), handle_(std::move(handle)) {}
  float* data() const { return data_; }
  size_t count() const { return count_; }

 private:
  float* data_ = nullptr;
  size_t count_ = 0;
  TensorHandle handle_;  // empty for the memory store
};

class ShardStore {
 public:
  virtual ~ShardStore() = default;
  virtual std::string Describe() const = 0;
  // `tier`: where the caller reads or writes it (kDevice or kHost).
  virtual StatusOr<ShardRef> Acquire(int block, ShardKind kind, Tier tier, AccessMode mode) = 0;
  // Starts moving a shard toward `tier`; the handle completes when it is there
  // (the memory store does nothing and returns an empty handle).
  virtual PrefetchHandle Prefetch(int block, ShardKind kind, Tier tier) = 0;
  // The shard's bytes are dead (a consumed gradient): the cache drops its copies
  // without writing them back; the memory store keeps them (nothing to save).
  virtual void Invalidate(int block, ShardKind kind) = 0;
  // The step's cache metrics (the memory store reports its one allocation as
  // host bytes reserved and used, and no traffic).
  virtual CacheMetrics EndStep() = 0;
  // nullptr for the memory store.
  virtual TensorCache* cache() = 0;
};

// shard_counts[b]: floats per shard of block b.
std::unique_ptr<ShardStore> MakeMemoryShardStore(const std::vector<size_t>& shard_counts);

struct CachedStoreOptions {
  uint64_t device_budget = 0;  // bytes of device slots
  uint64_t host_budget = 0;    // bytes of pinned host slots
  std::string nvme_dir;        // this rank's NVMe file goes here
  int rank = 0;
  bool cuda = false;           // real GPU device tier; else the simulated one
};
StatusOr<std::unique_ptr<ShardStore>> MakeCachedShardStore(const std::vector<size_t>& shard_counts,
                                                           const CachedStoreOptions& options);

}  // namespace tencache
