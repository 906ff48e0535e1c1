// The trainer's gradients, from the backward to the update: each block's
// contributions reduce-scattered to this rank (ShardGatherer), accumulated over
// micro-batches in the cache, and routed to the update they complete: at once,
// deferred (DeferredUpdater), or the tied embedding's split update
// (SplitEmbeddingUpdater).
#include <cstring>

#include "worker/trainer.h"

namespace tencache {

Status Trainer::ReduceGrad(int block, const torch::Tensor& dflat) {
  // fp32 (from bf16 in mixed precision), ours: the final contribution adds the stored part into it.
  torch::Tensor d = dflat.to(torch::kFloat32).contiguous();
  // With ranks > 1 the shard is reduced straight into the optimizer lane's
  // buffer while the lane is idle (all but the tied embedding's contribution
  // from the head, behind the last block's update): an update it completes is
  // issued from there without a copy (IssueUpdate), and any other use of it
  // (stored, deferred, the split embedding's) copies it out before returning.
  float* into = lane_ != nullptr && !lane_->in_flight() ? lane_->grad_buffer() : nullptr;
  TC_ASSIGN_OR_RETURN(float* src, gatherer_->ScatterGrad(block, d, into));
  const int k = contributions_[block]++;
  const bool complete = k + 1 == needed_[block];
  // The split embedding: the last head's contribution (all but the last lookup's) updates it.
  const bool early = split_embedding_ && block == 0 && k + 2 == needed_[0];
  if (complete && defer_updates_) return deferred_->Store(block, src, k > 0);
  if (complete && split_embedding_ && block == 0) return split_->Late(src);
  if (early && k == 0) return split_->Early(src, step_);
  if (complete && k == 0) return Update(block, src);  // in one piece: never stored
  for (int i = 0; i < layout_.Pieces(block, ShardKind::kGrad); ++i) {  // the stored gradient, piece by piece
    float* mine = src + layout_.PieceBegin(block, ShardKind::kGrad, i);
    if (!complete && !early) {
      TC_ASSIGN_OR_RETURN(ShardRef g, recorder_->Acquire(block, ShardKind::kGrad, i, Tier::kHost,
                                                         k == 0 ? AccessMode::kOverwrite : AccessMode::kWrite));
      float* dst = g.f32();
      if (k == 0) {
        std::memcpy(dst, mine, g.count() * sizeof(float));
      } else {
        for (size_t j = 0; j < g.count(); ++j) dst[j] += mine[j];
      }
      continue;
    }
    {
      TC_ASSIGN_OR_RETURN(ShardRef g, recorder_->Acquire(block, ShardKind::kGrad, i, Tier::kHost, AccessMode::kRead));
      const float* stored = g.f32();
      for (size_t j = 0; j < g.count(); ++j) mine[j] = stored[j] + mine[j];
    }
    recorder_->Invalidate(block, ShardKind::kGrad, i);  // consumed: never written back
  }
  if (early) return split_->Early(src, step_);
  return complete ? Update(block, src) : Status::Ok();
}

bool Trainer::UpdateReadsStoredGradient(int block) const {
  const int before = split_embedding_ && block == 0 ? needed_[0] - 1 : needed_[block];
  return defer_updates_ || before > 1;
}

}  // namespace tencache
