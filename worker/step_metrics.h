// StepMetrics: what one training step did, over every rank — the loss, its
// time, hit rates, bytes moved per link, stalls, memory peaks, each lane's busy
// time — and the JSON line rank 0 writes to metrics.jsonl for the launcher.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/link.h"
#include "common/step_lanes.h"

namespace tencache {

struct StepMetrics {
  int64_t step = 0;
  double loss = 0;           // mean over the global batch
  double step_time_s = 0;
  double tokens_per_s = 0;
  double lr = 0;             // the step's learning rate (train.lr_schedule)
  // Deferred updates only (train.grad_clip, fp16): the global L2 norm of the
  // step's gradient over all ranks, before clipping (unscaled); -1 otherwise.
  double grad_norm = -1;
  // fp16 only: the loss scale the step ran with (0 otherwise), whether its
  // gradient overflowed so that no update was applied, and such steps so far.
  double loss_scale = 0;
  bool skipped = false;
  int64_t skipped_steps = 0;
  // The validation loss, on steps where train.eval_every evaluates (NaN otherwise).
  double eval_loss = std::numeric_limits<double>::quiet_NaN();
  // tencache-sim's definition: parameter-shard device accesses (fwd/bwd) whose
  // shard stayed on the device since its previous access, all ranks.
  double device_hit_rate = 0;
  // The cache's: device acquires that found the shard there (a prefetch that
  // arrived in time counts), all ranks.
  double device_acquire_hit_rate = 0;
  // The same for the host tier: the optimizer's and the gradients' acquires
  // that found the shard in host memory (a state prefetch that arrived in time
  // counts), all ranks.
  double host_acquire_hit_rate = 0;
  // Of the host acquires, those that found the shard on its way there (a fetch
  // issued, not arrived: planned in time, copied too slowly), all ranks. Hit
  // rate plus late rate is the share the plan fetched ahead, however fast the disk.
  double host_acquire_late_rate = 0;
  // What the model computes in ("bf16" in mixed precision, with fp32 masters
  // and optimizer; "fp32"), and the job's model.dtype.
  std::string compute_dtype = "fp32";
  std::string job_dtype;
  LinkBytes bytes;           // summed over ranks
  double stall_s = 0;        // summed over ranks
  // The training thread's seconds in the optimizer (mean over ranks): its
  // updates' whole time, or with the optimizer lane issuing updates and
  // waiting to retire them (docs/worker.md, "The optimizer lane").
  double optimizer_wait_s = 0;
  // This rank's acquires that found every slot of their size pinned by the
  // optimizer lane's update and waited for it (at the least host budget).
  int lane_fallbacks = 0;
  // This rank's lane updates that the cache refused a slot the training
  // thread pinned, finished on the training thread (at the least host budget).
  int lane_yields = 0;
  double allocations_after_warmup = 0;  // summed over ranks
  double device_used_bytes = 0, device_reserved_bytes = 0;  // max over ranks
  double host_used_bytes = 0, host_reserved_bytes = 0;      // max over ranks
  double nvme_used_bytes = 0;                                // max over ranks
  int prefetches = 0;        // this rank's planned fetches issued
  // Of this rank's cache prefetches: parked until their victim's last use
  // before them, and declined (docs/cachemgr.md).
  int prefetches_deferred = 0, prefetches_declined = 0;
  // Busy seconds of each lane (the largest over ranks), and the busiest lane's
  // over the step time: 1.0 when the step is as short as its slowest lane allows.
  LaneBusy lanes;
  double overlap_efficiency = 0;
  // Each rank's own figures, by rank (the launcher groups them by node): step
  // time, stall, bytes moved per link, peak host and NVMe bytes, and the
  // process's resident peak (VmHWM) over the training steps so far and over
  // its initialisation (model.init loaded, states placed), -1 where /proc
  // cannot say.
  struct RankFigures {
    double step_time_s = 0, stall_s = 0;
    LinkBytes bytes;
    double host_used_bytes = 0, nvme_used_bytes = 0;
    double peak_rss_bytes = -1, setup_peak_rss_bytes = -1;
    LaneBusy lanes;
  };
  std::vector<RankFigures> per_rank;
  std::string ToJson() const;
};

}  // namespace tencache
