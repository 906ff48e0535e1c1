#include "worker/deferred_updater.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "worker/lane_timer.h"

namespace tencache {

DeferredUpdater::DeferredUpdater(const TrainSpec& train, bool fp16, const ShardLayout* layout,
                                 AccessRecorder* recorder, Communicator* comm, LaneBusy* lanes, size_t grad_floats,
                                 UpdateFn update)
    : grad_clip_(train.grad_clip),
      layout_(layout),
      recorder_(recorder),
      comm_(comm),
      lanes_(lanes),
      update_(std::move(update)),
      scale_(fp16, train.initial_loss_scale, train.loss_scale_window),
      update_grad_(grad_floats, 0.0f) {}

void DeferredUpdater::BeginStep() {
  step_loss_scale_ = scale_.scale();
  step_grad_norm_ = -1;
  step_skipped_ = false;
}

Status DeferredUpdater::Store(int block, const float* grad, bool add_stored) {
  double sumsq = 0;
  for (int i = 0; i < layout_->Pieces(block, ShardKind::kGrad); ++i) {
    const float* mine = grad + layout_->PieceBegin(block, ShardKind::kGrad, i);
    TC_ASSIGN_OR_RETURN(ShardRef g, recorder_->Acquire(block, ShardKind::kGrad, i, Tier::kHost,
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

Status DeferredUpdater::Apply(int64_t step) {
  double sumsq = grad_sumsq_;
  grad_sumsq_ = 0;
  {
    LaneTimer busy(lanes_, StepLane::kCollectives);
    TC_RETURN_IF_ERROR(comm_->AllReduceSum(&sumsq, 1));
  }
  const double loss_scale = scale_.scale();
  const double norm = std::sqrt(sumsq) / loss_scale;
  step_grad_norm_ = norm;
  const int blocks = int(layout_->num_blocks());
  if (!std::isfinite(norm)) {
    if (!scale_.dynamic()) {
      return Status::FailedPrecondition("step " + std::to_string(step) + ": the gradient is not finite (its norm is " +
                                        std::to_string(norm) + "): training diverged; lower train.lr");
    }
    for (int b = 0; b < blocks; ++b) {
      for (int i = 0; i < layout_->Pieces(b, ShardKind::kGrad); ++i) recorder_->Invalidate(b, ShardKind::kGrad, i);
    }
    scale_.Overflow();
    step_skipped_ = true;
    ++skipped_steps_;
    return Status::Ok();
  }
  const float unscale = float(1.0 / loss_scale);
  const float clip = grad_clip_ > 0 ? float(std::min(1.0, grad_clip_ / (norm + 1e-6))) : 1.0f;
  for (int b = 0; b < blocks; ++b) {
    for (int i = 0; i < layout_->Pieces(b, ShardKind::kGrad); ++i) {
      float* dst = update_grad_.data() + layout_->PieceBegin(b, ShardKind::kGrad, i);
      {
        TC_ASSIGN_OR_RETURN(ShardRef g, recorder_->Acquire(b, ShardKind::kGrad, i, Tier::kHost, AccessMode::kRead));
        const float* src = g.f32();
        const size_t n = g.count();
        LaneTimer busy(lanes_, StepLane::kOptimizer);
        if (unscale == 1.0f && clip == 1.0f) {
          std::memcpy(dst, src, n * sizeof(float));
        } else {
          for (size_t j = 0; j < n; ++j) dst[j] = src[j] * unscale * clip;
        }
      }
      recorder_->Invalidate(b, ShardKind::kGrad, i);  // consumed: never written back
    }
    TC_RETURN_IF_ERROR(update_(b, update_grad_.data()));
  }
  if (scale_.dynamic()) scale_.Good();
  return Status::Ok();
}

}  // namespace tencache
