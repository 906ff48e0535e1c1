#include "common/shard_bytes.h"

#include <algorithm>

namespace tencache {

const char* StateClassName(int c) {
  static const char* kNames[kNumStateClasses] = {"param", "grad", "master", "adam_m", "adam_v"};
  return c >= 0 && c < kNumStateClasses ? kNames[c] : "?";
}

uint64_t ShardBytes::total() const {
  uint64_t t = 0;
  for (uint64_t b : bytes) t += b;
  return t;
}

uint64_t ShardBytes::checkpoint(DType dtype) const {
  return bytes[UpdatedStateClass(dtype)] + bytes[kStateAdamM] + bytes[kStateAdamV];
}

std::vector<uint64_t> ShardCounts(const ModelShape& model, int ranks) {
  std::vector<uint64_t> counts;
  for (uint64_t n : model.BlockParamCounts()) counts.push_back((n + ranks - 1) / ranks);
  return counts;
}

std::vector<int> StatePieces(const std::vector<uint64_t>& shard_counts, int layers, DType dtype) {
  uint64_t limit = 0;
  for (int b = 1; b <= layers && b < int(shard_counts.size()); ++b) limit = std::max(limit, shard_counts[b]);
  return StatePiecesWithin(shard_counts, limit, dtype);
}

std::vector<int> StatePiecesWithin(const std::vector<uint64_t>& counts, uint64_t limit, DType dtype) {
  limit = std::max(limit, kMinStatePieceElements);
  std::vector<int> pieces;
  for (uint64_t n : counts) {
    uint64_t k = std::max<uint64_t>(1, (n + limit - 1) / limit);
    if (k == 2 && dtype != DType::kFp32) k = 3;
    pieces.push_back(int(k));
  }
  return pieces;
}

ShardBytes ShardBytesPerRank(const ModelShape& model, DType dtype, int ranks) {
  const std::vector<uint64_t> counts = ShardCounts(model, ranks);
  const std::vector<int> pieces = StatePieces(counts, model.layers, dtype);
  ShardBytes s;
  for (size_t b = 0; b < counts.size(); ++b) {
    for (int c = 0; c < kNumStateClasses; ++c) {
      const uint64_t elem = StateElementBytes(dtype, c);
      s.bytes[c] += counts[b] * elem;
      if (elem > 0) s.tensors += c == kStateParam ? 1 : uint64_t(pieces[b]);
    }
  }
  return s;
}

ShardTensors ShardTensorBytes(const ModelShape& model, DType dtype, int ranks) {
  const std::vector<uint64_t> counts = ShardCounts(model, ranks);
  const std::vector<int> pieces = StatePieces(counts, model.layers, dtype);
  ShardTensors t;
  for (size_t b = 0; b < counts.size(); ++b) {
    t.params.push_back(counts[b] * StateElementBytes(dtype, kStateParam));
    t.all.push_back(t.params.back());
    for (int c = kStateParam + 1; c < kNumStateClasses; ++c) {  // the state shards, in pieces
      if (StateElementBytes(dtype, c) == 0) continue;
      for (int i = 0; i < pieces[b]; ++i) {
        t.all.push_back(StatePieceElements(counts[b], pieces[b], i) * StateElementBytes(dtype, c));
      }
    }
  }
  return t;
}

bool DeferredUpdates(const JobSpec& job) { return job.dtype == DType::kFp16 || job.train.grad_clip > 0; }

bool SplitEmbeddingUpdate(const JobSpec& job) {
  return job.model.tied_embeddings && job.dtype != DType::kFp32 && !DeferredUpdates(job);
}

uint64_t HeldRowElements(const ModelShape& model, int ranks, int micro_batch) {
  const uint64_t block0 = model.BlockParamCounts()[0], count = (block0 + ranks - 1) / ranks;
  const uint64_t tokens = uint64_t(model.vocab) * model.hidden;
  const uint64_t rows = std::min<uint64_t>(model.vocab, uint64_t(micro_batch) * model.seq_len * ranks);
  return std::min(count, block0 - std::min(block0, tokens) + rows * model.hidden);
}

WorkerHostBuffers WorkerHostBufferBytes(const JobSpec& job, int ranks, const RankCompute& compute) {
  const std::vector<uint64_t> counts = ShardCounts(job.model, ranks);
  const uint64_t largest = *std::max_element(counts.begin(), counts.end());  // elements of a shard
  WorkerHostBuffers b;
  if (ranks > 1) b.scatter = (largest + 1) * 4;
  if (compute.gpu) b.grad_staging = largest * uint64_t(ranks) * 4;
  if (DeferredUpdates(job)) b.deferred_grad = (largest + 1) * 4;
  if (OptimizerLaneOn(job.train, compute)) b.optimizer_grad = largest * 4;
  if (SplitEmbeddingUpdate(job)) {
    b.embed_grad = counts[0] * 4;
    b.held_rows = kHeldRowArrays * HeldRowElements(job.model, ranks, job.train.micro_batch) * 4;
  }
  return b;
}

}  // namespace tencache
