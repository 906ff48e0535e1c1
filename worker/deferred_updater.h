// Deferred updates: with train.grad_clip or fp16 loss scaling an update needs
// the whole step's gradient norm (or its overflow check) first, so each
// complete gradient shard is stored in the cache (kGrad) as its backward ends
// (Store), and after the backward (Apply) the norm over all ranks decides the
// scale of every block's gradient, and every block is updated, block 0 first
// (or, on an fp16 overflow, none).
// LossScale: fp16's dynamic loss scale, as torch.cuda.amp.GradScaler keeps it.
// Training thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "common/job_spec.h"
#include "common/status.h"
#include "common/step_lanes.h"
#include "worker/access_recorder.h"
#include "worker/communicator.h"
#include "worker/shard_store.h"

namespace tencache {

// The loss is multiplied by scale() before the backward. Dynamic (fp16): an
// overflow halves it; `window` steps in a row without one double it. Static:
// 1, always.
class LossScale {
 public:
  LossScale(bool dynamic, double initial, int window)
      : dynamic_(dynamic), window_(window), scale_(dynamic ? initial : 1.0) {}
  bool dynamic() const { return dynamic_; }
  double scale() const { return scale_; }
  int good_steps() const { return good_steps_; }  // steps since the scale last changed, without overflow
  void Overflow() {
    scale_ *= 0.5;
    good_steps_ = 0;
  }
  // A step without overflow. REQUIRES: dynamic().
  void Good() {
    if (++good_steps_ == window_) {
      scale_ *= 2.0;
      good_steps_ = 0;
    }
  }
  // A checkpoint's state.
  void Restore(double scale, int good_steps) {
    scale_ = scale;
    good_steps_ = good_steps;
  }

 private:
  const bool dynamic_;
  const int window_;
  double scale_;
  int good_steps_ = 0;
};

class DeferredUpdater {
 public:
  // Updates `block` with its complete gradient shard `grad` (this rank's,
  // unscaled and clipped).
  using UpdateFn = std::function<Status(int block, const float* grad)>;
  // `fp16`: dynamic loss scaling from train.initial_loss_scale (every
  // loss_scale_window good steps doubling it); grad_clip > 0: clipping.
  // `grad_floats`: the largest gradient shard (WorkerHostBuffers::deferred_grad).
  // REQUIRES: layout, recorder and comm outlive it.
  DeferredUpdater(const TrainSpec& train, bool fp16, const ShardLayout* layout, AccessRecorder* recorder,
                  Communicator* comm, LaneBusy* lanes, size_t grad_floats, UpdateFn update);

  // The scale the loss is multiplied by before the backward (1 unless fp16).
  double loss_scale() const { return scale_.scale(); }
  // A step begins: its figures (step_*) start afresh.
  void BeginStep();
  // Stores `block`'s complete gradient shard `grad` (plus the stored part
  // when `add_stored`: the step accumulated it) piece by piece, and adds its
  // squares to this rank's share of the norm.
  Status Store(int block, const float* grad, bool add_stored);
  // After the backward, REQUIRES every block's gradient stored: as
  // torch.nn.utils.clip_grad_norm_ after GradScaler.unscale_, the norm of the
  // unscaled gradient over every rank (collective); a non-finite one skips
  // the step and halves the scale (fp16), or fails it naming `step` (fp32);
  // otherwise each gradient times 1 / scale, times min(1, grad_clip / (norm +
  // 1e-6)) (a factor of 1 is not applied), updates its block, block 0 first.
  // Every stored piece is consumed.
  Status Apply(int64_t step);

  // This step's: the scale its loss was multiplied by, its gradient norm (-1:
  // not computed), whether its update was skipped.
  double step_loss_scale() const { return step_loss_scale_; }
  double step_grad_norm() const { return step_grad_norm_; }
  bool step_skipped() const { return step_skipped_; }
  int64_t skipped_steps() const { return skipped_steps_; }  // over the run

  // A checkpoint's state.
  int good_steps() const { return scale_.good_steps(); }
  void Restore(double loss_scale, int good_steps, int64_t skipped_steps) {
    scale_.Restore(loss_scale, good_steps);
    skipped_steps_ = skipped_steps;
  }
  // Bytes of the host buffer it holds (WorkerHostBuffers::deferred_grad).
  uint64_t host_bytes() const { return uint64_t(update_grad_.capacity()) * sizeof(float); }

 private:
  const double grad_clip_;
  const ShardLayout* const layout_;
  AccessRecorder* const recorder_;
  Communicator* const comm_;
  LaneBusy* const lanes_;
  const UpdateFn update_;
  LossScale scale_;
  double grad_sumsq_ = 0;  // this rank's share of the step's squared gradient norm
  double step_loss_scale_ = 1.0, step_grad_norm_ = -1;
  bool step_skipped_ = false;
  int64_t skipped_steps_ = 0;
  std::vector<float> update_grad_;  // a stored gradient, scaled, on its way to the update
};

}  // namespace tencache
