// ShardStore: where this rank's shards of every block live — the parameter
// shard the model computes with, its accumulated gradient, the two AdamW
// moments and, in mixed precision, the fp32 master copy of the parameters. The
// trainer reaches them only through Acquire, which returns a ShardRef pinning
// the data until it is destroyed.
//
// Element types: common/shard_bytes.h StateElementBytes — gradients, moments
// and masters are fp32; the parameter shard is 16-bit in mixed precision (what
// is gathered, copied to the device and computed with: half the bytes) and
// fp32 otherwise (then it is its own master).
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
#include <optional>
#include <string>
#include <vector>

#include "cachemgr/tensor_cache.h"
#include "common/shard_bytes.h"
#include "common/status.h"

namespace tencache {

enum class ShardKind : int { kParam = 0, kGrad = 1, kAdamM = 2, kAdamV = 3, kMaster = 4 };
constexpr int kShardKinds = 4;  // per block in every store; kMaster only in mixed precision
const char* ShardKindName(ShardKind kind);
// The cache tensor id of a block's shard of kind kParam..kAdamV (its first
// piece): 4 per block, in block order (masters, when present, follow all of
// them, then the further pieces: ShardLayout::Id).
inline TensorId ShardTensorId(int block, ShardKind kind) { return TensorId(block * kShardKinds + int(kind)); }
// The state class of common/shard_bytes.h a kind holds.
constexpr int ShardKindClass(ShardKind kind) {
  constexpr int kClass[] = {kStateParam, kStateGrad, kStateAdamM, kStateAdamV, kStateMaster};
  return kClass[int(kind)];
}

// A pinned shard, or piece of one. Move-only; unpins when destroyed.
class ShardRef {
 public:
  ShardRef() = default;
  ShardRef(void* data, size_t count, TensorHandle handle = {})
      : data_(data), count_(count), handle_(std::move(handle)) {}
  void* data() const { return data_; }
  // REQUIRES: an fp32 shard (every kind but a mixed-precision kParam).
  float* f32() const { return static_cast<float*>(data_); }
  size_t count() const { return count_; }  // elements

 private:
  void* data_ = nullptr;
  size_t count_ = 0;
  TensorHandle handle_;  // empty for the memory store
};

struct ShardLayout {
  std::vector<size_t> counts;  // elements per shard, per block
  // Pieces each fp32 state shard of a block (gradient, moments, master in mixed
  // precision) is cut into, per block (common/shard_bytes.h StatePieces);
  // empty: one each. The parameter shard is never cut: the model computes with
  // it whole (in fp32 it is also the master, so there only the gradient and the
  // moments are cut).
  std::vector<int> pieces;
  bool mixed = false;          // 2-byte parameters (bf16, or fp16 when `fp16`) + fp32 masters
  bool fp16 = false;
  size_t num_blocks() const { return counts.size(); }
  // Elements of the whole block over `ranks` shards: its numel padded to a
  // multiple of the ranks.
  size_t Padded(int block, int ranks) const { return counts[size_t(block)] * size_t(ranks); }
  DType dtype() const { return !mixed ? DType::kFp32 : fp16 ? DType::kFp16 : DType::kBf16; }
  // Bytes of one element of `kind` (common/shard_bytes.h StateElementBytes).
  size_t ElementBytes(ShardKind kind) const { return size_t(StateElementBytes(dtype(), ShardKindClass(kind))); }
  size_t Bytes(int block, ShardKind kind) const { return counts[block] * ElementBytes(kind); }
  // The kinds a block has: kParam..kAdamV, and kMaster when mixed.
  std::vector<ShardKind> Kinds() const;
  // The fp32 copy AdamW updates: the master in mixed precision, else the parameter.
  ShardKind MasterKind() const { return mixed ? ShardKind::kMaster : ShardKind::kParam; }
  // Pieces of the block's shard of `kind`: 1 for kParam.
  int Pieces(int block, ShardKind kind) const {
    return kind == ShardKind::kParam || pieces.empty() ? 1 : pieces[size_t(block)];
  }
  // Piece `piece` of the shard is its elements [PieceBegin, PieceBegin +
  // PieceCount): near-equal pieces, in order (common/shard_bytes.h
  // StatePieceBegin). REQUIRES: piece < Pieces(block, kind), or == for PieceBegin
  // (the shard's end).
  size_t PieceBegin(int block, ShardKind kind, int piece) const;
  size_t PieceCount(int block, ShardKind kind, int piece) const;
  // The cache tensor of a piece: the first pieces as ShardTensorId (masters
  // after them), the further pieces after every first piece.
  TensorId Id(int block, ShardKind kind, int piece = 0) const;
  size_t num_tensors() const;

 private:
  size_t FurtherPiecesBefore(int block) const;
};

// The layout of one rank's shards of blocks of `block_numel` elements each,
// split across `ranks` ranks in `dtype`: ceil(numel / ranks) elements a block
// (every rank reserves the padded size), the fp32 state shards cut as
// common/shard_bytes.h StatePieces cuts them (`layers`: the layer blocks 1..layers).
// REQUIRES: ranks >= 1.
ShardLayout MakeShardLayout(const std::vector<uint64_t>& block_numel, int layers, DType dtype, int ranks);

class ShardStore {
 public:
  virtual ~ShardStore() = default;
  virtual std::string Describe() const = 0;
  virtual const ShardLayout& layout() const = 0;
  // Piece `piece` of a shard (layout().Pieces; 0 for an uncut one), with
  // layout().PieceCount elements. `tier`: where the caller reads or writes it
  // (kDevice or kHost).
  virtual StatusOr<ShardRef> Acquire(int block, ShardKind kind, int piece, Tier tier, AccessMode mode) = 0;
  // Starts moving a piece toward `tier`; the handle completes when it is there
  // (the memory store does nothing and returns an empty handle).
  virtual PrefetchHandle Prefetch(int block, ShardKind kind, int piece, Tier tier) = 0;
  // The piece's bytes are dead (a consumed gradient): the cache drops its copies
  // without writing them back; the memory store keeps them (nothing to save).
  virtual void Invalidate(int block, ShardKind kind, int piece) = 0;
  // The step's cache metrics (the memory store reports its one allocation as
  // host bytes reserved and used, and no traffic).
  virtual CacheMetrics EndStep() = 0;
  // nullptr for the memory store.
  virtual TensorCache* cache() = 0;
};

std::unique_ptr<ShardStore> MakeMemoryShardStore(const ShardLayout& layout);

struct CachedStoreOptions {
  uint64_t device_budget = 0;  // bytes of device slots
  uint64_t host_budget = 0;    // bytes of pinned host slots
  // Bytes of NVMe (job key cache.nvme_budget; nullopt: room for every shard).
  // A write-back beyond it fails the Acquire/Prefetch that caused it with
  // ResourceExhausted naming the key; 0 (no NVMe file) makes creation fail with
  // InvalidArgument unless host_budget holds every shard.
  std::optional<uint64_t> nvme_budget;
  std::string nvme_dir;        // this rank's NVMe file goes here
  int rank = 0;
  bool cuda = false;           // real GPU device tier (and a cudaHostRegister'd host tier); else the simulated one
  int cuda_device = 0;         // which GPU, when cuda
  FileEnv* file_env = nullptr;  // the NVMe tier's files; nullptr: POSIX
};
StatusOr<std::unique_ptr<ShardStore>> MakeCachedShardStore(const ShardLayout& layout,
                                                           const CachedStoreOptions& options);

}  // namespace tencache
