// ShardBytes: the bytes one rank of the worker holds of every block under
// ZeRO-3 — the one per-parameter byte accounting of a run, read by the
// planner (launcher/resource_model.h), the resolved cache budgets
// (launcher/cache_budgets.h), the simulator's tier layout (scheduler/plan.h)
// and the worker's shards (worker/shard_store.h ShardLayout).
//
// Each block's parameters are split into ceil(params / ranks) elements per
// rank (the last rank's shard is padded to that size: every rank reserves it),
// and each rank keeps per block one shard of each state class at
// StateElementBytes per element. Gradient shards are fp32 in every dtype: they
// accumulate over micro-batches, and the reduce-scatter delivers fp32. The
// cache keeps room for the gradient even where a step does not accumulate
// (then a gradient goes from the reduce-scatter straight into AdamW and its
// shard is never written, so it never reaches NVMe). A block much larger than
// a layer (GPT-2's tied embedding) has its fp32 state shards cut into pieces
// (StatePieces), each its own cache tensor. Pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "common/job_spec.h"
#include "common/model_shape.h"

namespace tencache {

// The state classes of a parameter: the shard the model computes with (the
// device tier's), its accumulated gradient, the fp32 master (mixed precision
// only; in fp32 the parameter is its own master) and the two AdamW moments.
enum StateClass : int { kStateParam = 0, kStateGrad, kStateMaster, kStateAdamM, kStateAdamV, kNumStateClasses };
// "param", "grad", "master", "adam_m", "adam_v"; "?" out of range.
const char* StateClassName(int state_class);

// Bytes per element of each state class — the one table:
//              param  grad  master  adam_m  adam_v   per parameter
//   fp32         4      4      0       4       4         16
//   bf16, fp16   2      4      4       4       4         18
constexpr uint64_t StateElementBytes(DType dtype, int state_class) {
  constexpr uint64_t kFp32[kNumStateClasses] = {4, 4, 0, 4, 4};
  constexpr uint64_t kMixed[kNumStateClasses] = {2, 4, 4, 4, 4};
  return dtype == DType::kFp32 ? kFp32[state_class] : kMixed[state_class];
}
// The fp32 copy AdamW updates and a checkpoint saves with the moments: the
// master in mixed precision, the parameter itself in fp32.
constexpr int UpdatedStateClass(DType dtype) { return dtype == DType::kFp32 ? kStateParam : kStateMaster; }
// The state classes the worker's device tier holds: the parameter shards the
// model computes with. Gradients, masters and moments live on the host and
// NVMe (AdamW runs on the CPU); the planner's GPU fill and the worker's cache
// tensors (worker/shard_store.h) both read this.
constexpr bool DeviceTierHolds(int state_class) { return state_class == kStateParam; }
// The bytes of the gradient shard beside a parameter shard of
// `param_shard_bytes` bytes in `dtype`: what a GPU rank copies device->host
// for a block's gradient each backward. The worker converts the gradient to
// fp32 on the device, reduce-scatters it there (NCCL) and copies this rank's
// shard out (worker/trainer_grads.cc); without NCCL (one rank, or a build
// without it) it copies the whole block's fp32 gradient out before the host
// reduce-scatter: ranks times this. REQUIRES: param_shard_bytes is a whole
// number of parameter elements.
constexpr uint64_t GradShardBytes(uint64_t param_shard_bytes, DType dtype) {
  return param_shard_bytes / StateElementBytes(dtype, kStateParam) * StateElementBytes(dtype, kStateGrad);
}

struct ShardBytes {
  std::array<uint64_t, kNumStateClasses> bytes{};  // per state class, over every block
  uint64_t tensors = 0;  // cache tensors that hold bytes (for slot rounding)
  uint64_t total() const;
  // What a checkpoint saves: UpdatedStateClass and both moments.
  uint64_t checkpoint(DType dtype) const;
};

// REQUIRES: ranks >= 1.
ShardBytes ShardBytesPerRank(const ModelShape& model, DType dtype, int ranks);
// Elements of each block's shard on one rank: ceil(block params / ranks).
std::vector<uint64_t> ShardCounts(const ModelShape& model, int ranks);

// Pieces each fp32 state shard of each block is cut into (the gradient, both
// moments and, in mixed precision, the master; never the parameter shard,
// which the model computes with whole): the fewest near-equal pieces no
// larger than the largest layer's shard (blocks 1..layers) or
// kMinStatePieceElements, whichever is more, so that one huge block does not
// set the host tier's least budget (the cache keeps kWorkerHostSlotsPerClass
// slots of every size). The update pins the parameter shard beside three
// pieces, so a piece must never be its size class: never two pieces in mixed
// precision (half an fp32 shard is its 16-bit parameter's size; three then),
// and pieces of at least 64 KiB keep three or more apart from it despite the
// 4 KiB rounding of slots. `shard_counts`: elements per rank of each block.
constexpr uint64_t kMinStatePieceElements = 16384;
std::vector<int> StatePieces(const std::vector<uint64_t>& shard_counts, int layers, DType dtype);
// The same rule for any list of shards (`counts` elements each) with the
// largest layer's shard given as `limit` elements: what the simulator applies
// to a trace's tensors.
std::vector<int> StatePiecesWithin(const std::vector<uint64_t>& counts, uint64_t limit, DType dtype);
// Where piece `piece` of a shard of `count` elements cut into `pieces`
// near-equal pieces begins (the first count % pieces pieces hold one element
// more); piece `pieces` begins at `count`. REQUIRES: 0 <= piece <= pieces, pieces >= 1.
inline uint64_t StatePieceBegin(uint64_t count, int pieces, int piece) {
  const uint64_t k = uint64_t(pieces), i = uint64_t(piece);
  return i * (count / k) + (i < count % k ? i : count % k);
}
// Elements of piece `piece` of that cut. REQUIRES: 0 <= piece < pieces.
inline uint64_t StatePieceElements(uint64_t count, int pieces, int piece) {
  return StatePieceBegin(count, pieces, piece + 1) - StatePieceBegin(count, pieces, piece);
}

// The byte size of every cache tensor one rank holds (each block's parameter,
// and the pieces of its master in mixed precision, moments and gradient
// shards), and of the parameter shards alone, one per block.
struct ShardTensors {
  std::vector<uint64_t> all;
  std::vector<uint64_t> params;
};
ShardTensors ShardTensorBytes(const ModelShape& model, DType dtype, int ranks);

// The worker's cache keeps at least this many host slots per size class (a
// tensor being updated, its next, and one being written back).
constexpr uint64_t kWorkerHostSlotsPerClass = 3;

// Host memory one rank of the worker allocates once, beside its cache and
// beside the blocks it computes with (the resource model's working set; on a
// CPU the gathered blocks are host buffers too), all fp32: the reduce-scatter's
// output (more than one rank); a whole block's gradient staged on its way to
// AdamW (on a GPU); the stored gradient of a deferred update (train.grad_clip
// or fp16); and the split embedding update's copy of block 0's gradient shard
// with its held rows (a tied embedding in mixed precision, not deferred); the
// optimizer lane's copy of the gradient it updates with (OptimizerLaneOn). Each
// is sized for the largest block; the trainer allocates exactly these.
struct WorkerHostBuffers {
  uint64_t scatter = 0, grad_staging = 0, deferred_grad = 0, embed_grad = 0, held_rows = 0, optimizer_grad = 0;
  uint64_t total() const { return scatter + grad_staging + deferred_grad + embed_grad + held_rows + optimizer_grad; }
};
// `compute`: where each rank computes (its gpu flag: a GPU's gradients are
// staged in host memory).
// REQUIRES: job.model describes a model (layers, hidden, vocab > 0); ranks >= 1.
WorkerHostBuffers WorkerHostBufferBytes(const JobSpec& job, int ranks, const RankCompute& compute);
// Whether the worker updates after the whole backward (train.grad_clip, fp16),
// and whether it splits a tied embedding's update around the lookup.
bool DeferredUpdates(const JobSpec& job);
bool SplitEmbeddingUpdate(const JobSpec& job);
// Elements of block 0's shard on one rank that the split update holds back
// (its other parameters, and the token rows the last micro-batch of every rank
// may look up), at most: the capacity of each of its kHeldRowArrays fp32
// arrays (the gradient, master and moments, of this step and of the previous
// one); WorkerHostBuffers::held_rows is that many arrays of it.
inline constexpr int kHeldRowArrays = 8;
uint64_t HeldRowElements(const ModelShape& model, int ranks, int micro_batch);

}  // namespace tencache
