// The trainer's gradients, from the backward to the update: each block's
// reduce-scatter to this rank, accumulation over micro-batches, and the
// deferred mode's global norm, clipping and fp16 loss scaling.
#include <cmath>
#include <cstring>

#include "worker/trainer.h"

namespace tencache {

StatusOr<float*> Trainer::ScatterGrad(int block, const torch::Tensor& d) {
  const size_t n = layout_.counts[block];
  float* src = d.data_ptr<float>();
  if (device_.cuda() && !comm_->device_buffers()) {  // to host memory first: MPI and AdamW take it there
    torch::from_blob(grad_host_.data(), {d.numel()}, torch::kFloat32).copy_(d);
    src = grad_host_.data();
  }
  if (ranks_ > 1) {
    const double t0 = Now();
    float* out = comm_->device_buffers() ? scatter_dev_.data_ptr<float>() : scatter_.data();
    {
      LaneTimer busy(this, StepLane::kCollectives);
      TC_RETURN_IF_ERROR(comm_->ReduceScatterSum(src, out, n));
    }
    profiler_.RecordCollective({CollectiveKind::kReduceScatter, block, n * sizeof(float) * (ranks_ - 1),
                                t0 - step_start_, Now() - step_start_});
    if (comm_->device_buffers()) {
      torch::from_blob(scatter_.data(), {int64_t(n)}, torch::kFloat32).copy_(scatter_dev_.narrow(0, 0, int64_t(n)));
    }
    src = scatter_.data();
  }
  return src;
}

torch::Tensor Trainer::BlockGradient(int block) {
  return grad_work_.narrow(0, 0, int64_t(padded(block))).zero_();
}

Status Trainer::ReduceGrad(int block, const torch::Tensor& dflat) {
  // fp32 (from bf16 in mixed precision), ours: the final contribution adds the stored part into it.
  torch::Tensor d = dflat.to(torch::kFloat32).contiguous();
  TC_ASSIGN_OR_RETURN(float* src, ScatterGrad(block, d));
  const int k = contributions_[block]++;
  const bool complete = k + 1 == needed_[block];
  // The split embedding: the last head's contribution (all but the last lookup's) updates it.
  const bool early = split_embedding_ && block == 0 && k + 2 == needed_[0];
  if (complete && deferred_) return StoreGradient(block, src, k > 0);
  if (complete && split_embedding_ && block == 0) return LateEmbeddingUpdate(src);
  if (early && k == 0) return EarlyEmbeddingUpdate(src);
  if (complete && k == 0) return UpdateBlock(block, src);  // in one piece: never stored
  for (int i = 0; i < layout_.Pieces(block, ShardKind::kGrad); ++i) {  // the stored gradient, piece by piece
    float* mine = src + layout_.PieceBegin(block, ShardKind::kGrad, i);
    if (!complete && !early) {
      TC_ASSIGN_OR_RETURN(ShardRef g, Acquire(block, ShardKind::kGrad, i, Tier::kHost,
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
      TC_ASSIGN_OR_RETURN(ShardRef g, Acquire(block, ShardKind::kGrad, i, Tier::kHost, AccessMode::kRead));
      const float* stored = g.f32();
      for (size_t j = 0; j < g.count(); ++j) mine[j] = stored[j] + mine[j];
    }
    store_->Invalidate(block, ShardKind::kGrad, i);  // consumed: never written back
    if (!sampling_) step_events_.push_back(StepEvent::Invalidate(block, kStateGrad, i));
  }
  if (early) return EarlyEmbeddingUpdate(src);
  return complete ? UpdateBlock(block, src) : Status::Ok();
}

bool Trainer::UpdateReadsStoredGradient(int block) const {
  const int before = split_embedding_ && block == 0 ? needed_[0] - 1 : needed_[block];
  return deferred_ || before > 1;
}

// A complete gradient shard (plus the stored part when the step accumulated)
// into the cache, to wait for the step's norm.
Status Trainer::StoreGradient(int block, const float* grad, bool add_stored) {
  double sumsq = 0;
  for (int i = 0; i < layout_.Pieces(block, ShardKind::kGrad); ++i) {
    const float* mine = grad + layout_.PieceBegin(block, ShardKind::kGrad, i);
    TC_ASSIGN_OR_RETURN(ShardRef g, Acquire(block, ShardKind::kGrad, i, Tier::kHost,
                                            add_stored ? AccessMode::kWrite : AccessMode::kOverwrite));
    float* dst = g.f32();
    for (size_t j = 0; j < g.count(); ++j) {
      const float v = add_stored ? dst[j] + mine[j] : mine[j];
      dst[j] = v;
      sumsq += double(v) * double(v);
    }
  }
  grad_sumsq_ += sumsq;
  return Status::Ok();
}

// As torch.nn.utils.clip_grad_norm_ after torch.cuda.amp.GradScaler.unscale_:
// the norm of the unscaled gradient over every rank's shard; a non-finite one
// (fp16 overflow) skips the step and halves the scale, and each
// loss_scale_window steps without one double it; otherwise each gradient is
// multiplied by 1 / scale, then by min(1, grad_clip / (norm + 1e-6)) (a factor
// of 1 is not applied, so a threshold never reached changes nothing).
Status Trainer::ApplyDeferredUpdates() {
  double sumsq = grad_sumsq_;
  grad_sumsq_ = 0;
  {
    LaneTimer busy(this, StepLane::kCollectives);
    TC_RETURN_IF_ERROR(comm_->AllReduceSum(&sumsq, 1));
  }
  const double norm = std::sqrt(sumsq) / loss_scale_;
  step_grad_norm_ = norm;
  if (!std::isfinite(norm)) {
    if (!fp16_) {
      return Status::FailedPrecondition("step " + std::to_string(step_) + ": the gradient is not finite (its norm is " +
                                        std::to_string(norm) + "): training diverged; lower train.lr");
    }
    for (int b = 0; b < model_.num_blocks(); ++b) {
      for (int i = 0; i < layout_.Pieces(b, ShardKind::kGrad); ++i) {
        store_->Invalidate(b, ShardKind::kGrad, i);
        if (!sampling_) step_events_.push_back(StepEvent::Invalidate(b, kStateGrad, i));
      }
    }
    loss_scale_ *= 0.5;
    good_steps_ = 0;
    step_skipped_ = true;
    ++skipped_steps_;
    return Status::Ok();
  }
  const float unscale = float(1.0 / loss_scale_);
  const float clip = job_.train.grad_clip > 0 ? float(std::min(1.0, job_.train.grad_clip / (norm + 1e-6))) : 1.0f;
  for (int b = 0; b < model_.num_blocks(); ++b) {
    for (int i = 0; i < layout_.Pieces(b, ShardKind::kGrad); ++i) {
      float* dst = update_grad_.data() + layout_.PieceBegin(b, ShardKind::kGrad, i);
      {
        TC_ASSIGN_OR_RETURN(ShardRef g, Acquire(b, ShardKind::kGrad, i, Tier::kHost, AccessMode::kRead));
        const float* src = g.f32();
        const size_t n = g.count();
        LaneTimer busy(this, StepLane::kOptimizer);
        if (unscale == 1.0f && clip == 1.0f) {
          std::memcpy(dst, src, n * sizeof(float));
        } else {
          for (size_t j = 0; j < n; ++j) dst[j] = src[j] * unscale * clip;
        }
      }
      store_->Invalidate(b, ShardKind::kGrad, i);  // consumed: never written back
      if (!sampling_) step_events_.push_back(StepEvent::Invalidate(b, kStateGrad, i));
    }
    TC_RETURN_IF_ERROR(UpdateBlock(b, update_grad_.data()));
  }
  if (fp16_ && ++good_steps_ == job_.train.loss_scale_window) {
    loss_scale_ *= 2.0;
    good_steps_ = 0;
  }
  return Status::Ok();
}

}  // namespace tencache
