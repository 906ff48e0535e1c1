// ShardBytes: the bytes one rank of the worker holds of every block under
// ZeRO-3 — the one per-parameter byte accounting of a run. Each block's
// parameters are split into ceil(params / ranks) elements per rank, and each
// rank keeps per block: the parameter shard in the compute dtype (2 bytes in
// bf16 mixed precision, else 4), the fp32 master in mixed precision, the two
// fp32 AdamW moments, and an fp32 gradient shard. The cache keeps room for the
// gradient even where a step does not accumulate (then a gradient goes from the
// reduce-scatter straight into AdamW and its shard is never written, so it
// never reaches NVMe). worker/shard_store.h's ShardLayout holds
// the same shards (tests/worker checks that they agree); the launcher sizes the
// cache budgets of a run from it. Pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "common/model_shape.h"

namespace tencache {

struct ShardBytes {
  uint64_t param = 0;   // the shards the model computes with (the device tier's)
  uint64_t master = 0;  // fp32 masters (mixed precision only)
  uint64_t adam = 0;    // both moments
  uint64_t grad = 0;    // accumulated gradients
  uint64_t tensors = 0; // cache tensors that hold bytes (for slot rounding)
  uint64_t total() const { return param + master + adam + grad; }
};

// REQUIRES: ranks >= 1. fp16 is accounted as bf16.
ShardBytes ShardBytesPerRank(const ModelShape& model, DType dtype, int ranks);

// The byte size of every cache tensor one rank holds (each block's parameter,
// master in mixed precision, moments and gradient shards), and of the
// parameter shards alone, one per block.
struct ShardTensors {
  std::vector<uint64_t> all;
  std::vector<uint64_t> params;
};
ShardTensors ShardTensorBytes(const ModelShape& model, DType dtype, int ranks);

// The worker's cache keeps at least this many host slots per size class (a
// tensor being updated, its next, and one being written back).
constexpr uint64_t kWorkerHostSlotsPerClass = 3;

}  // namespace tencache
