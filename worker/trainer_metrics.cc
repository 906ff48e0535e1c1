// The trainer's step metrics: each rank's figures gathered into one StepMetrics;
// the host memory it holds beside its cache.
#include <algorithm>
#include <iterator>

#include "worker/process_memory.h"
#include "worker/trainer.h"

namespace tencache {

StatusOr<StepMetrics> Trainer::Collect(double loss_sum, double seconds, const CacheMetrics& c) {
  const TierMetrics& dev = c.tier(Tier::kDevice);
  double sums[] = {loss_sum,
                   double(c.link(Link::kH2D).bytes),
                   double(c.link(Link::kD2H).bytes),
                   double(c.link(Link::kNvmeRead).bytes),
                   double(c.link(Link::kNvmeWrite).bytes),
                   c.stall_seconds,
                   double(c.allocations_after_setup - std::min(c.allocations_after_setup, allocations_at_warmup_)),
                   double(dev.hits),
                   double(dev.misses),
                   seconds,
                   double(hit_counter_->hits()),
                   double(hit_counter_->accesses()),
                   double(c.tier(Tier::kHost).hits),
                   double(c.tier(Tier::kHost).misses),
                   optimizer_wait_s_,
                   double(c.tier(Tier::kHost).late)};
  hit_counter_->Reset();
  TC_RETURN_IF_ERROR(comm_->AllReduceSum(sums, std::size(sums)));
  // This rank's lanes: the training thread's (compute, collectives, optimizer)
  // and the cache's links.
  LaneBusy lanes = lanes_;
  lanes_ = LaneBusy();
  for (Link l : kLinks) lanes[LaneOf(l)] = c.link(l).busy_seconds;
  // The links' clocks run from the previous step's end: a copy between steps
  // (after the metrics, during validation) is not this step's work beyond its length.
  for (double& busy : lanes.seconds) busy = std::min(busy, seconds);
  // Per rank: peaks (device used, device reserved, host used, host reserved,
  // NVMe used), then this rank's own step time, stall, bytes per link, its
  // resident peaks (training so far, initialisation) and lanes.
  constexpr int kFixed = 13, kFields = kFixed + kStepLanes;
  double mine[kFields] = {double(dev.peak_used_bytes), double(dev.reserved_bytes),
                          double(c.tier(Tier::kHost).peak_used_bytes), double(c.tier(Tier::kHost).reserved_bytes),
                          double(c.tier(Tier::kNvme).used_bytes), seconds, c.stall_seconds,
                          double(c.link(Link::kH2D).bytes), double(c.link(Link::kD2H).bytes),
                          double(c.link(Link::kNvmeRead).bytes), double(c.link(Link::kNvmeWrite).bytes),
                          double(ReadResidentBytes().peak), setup_peak_rss_};
  std::copy(std::begin(lanes.seconds), std::end(lanes.seconds), mine + kFixed);
  std::vector<double> all(kFields * ranks_);
  TC_RETURN_IF_ERROR(comm_->AllGather(mine, all.data(), sizeof mine));
  double peak[5] = {0, 0, 0, 0, 0};
  LaneBusy busiest;  // per lane, the largest over ranks
  std::vector<StepMetrics::RankFigures> per_rank(ranks_);
  for (int r = 0; r < ranks_; ++r) {
    const double* f = &all[size_t(r) * kFields];
    for (int i = 0; i < 5; ++i) peak[i] = std::max(peak[i], f[i]);
    per_rank[r] = {f[5], f[6], LinkBytes{{f[7], f[8], f[9], f[10]}}, f[2], f[4], f[11], f[12], LaneBusy{}};  // lanes: below
    for (int l = 0; l < kStepLanes; ++l) {
      per_rank[r].lanes.seconds[l] = f[kFixed + l];
      busiest.seconds[l] = std::max(busiest.seconds[l], f[kFixed + l]);
    }
  }
  StepMetrics m;
  m.step = step_;
  m.loss = sums[0] / (double(accum_) * ranks_);
  m.step_time_s = sums[9] / ranks_;
  m.tokens_per_s = double(job_.train.global_batch) * job_.model.seq_len / m.step_time_s;
  m.lr = LearningRateAt(job_.train, step_);
  m.grad_norm = deferred_->step_grad_norm();
  m.loss_scale = fp16_ ? deferred_->step_loss_scale() : 0.0;
  m.skipped = deferred_->step_skipped();
  m.skipped_steps = deferred_->skipped_steps();
  m.bytes[Link::kH2D] = sums[1];
  m.bytes[Link::kD2H] = sums[2];
  m.bytes[Link::kNvmeRead] = sums[3];
  m.bytes[Link::kNvmeWrite] = sums[4];
  m.stall_s = sums[5];
  m.optimizer_wait_s = sums[14] / ranks_;
  m.lane_fallbacks = lane_fallbacks_;
  m.lane_yields = lane_yields_;
  m.allocations_after_warmup = steps_run_ == 0 ? 0 : sums[6];
  m.device_hit_rate = sums[11] > 0 ? sums[10] / sums[11] : 1.0;
  auto rate = [](double hits, double misses) { return hits + misses > 0 ? hits / (hits + misses) : 1.0; };
  m.device_acquire_hit_rate = rate(sums[7], sums[8]);
  m.host_acquire_hit_rate = rate(sums[12], sums[13]);
  m.host_acquire_late_rate = sums[12] + sums[13] > 0 ? sums[15] / (sums[12] + sums[13]) : 0.0;
  m.compute_dtype = TorchDtypeName(compute_dtype_);
  m.job_dtype = DTypeName(job_.dtype);
  m.device_used_bytes = peak[0];
  m.device_reserved_bytes = peak[1];
  m.host_used_bytes = peak[2];
  m.host_reserved_bytes = peak[3];
  m.nvme_used_bytes = peak[4];
  m.per_rank = std::move(per_rank);
  m.lanes = busiest;
  m.overlap_efficiency = busiest.OverlapEfficiency(m.step_time_s);
  m.prefetches = driver_->TakeFetchesIssued();
  m.prefetches_deferred = int(c.prefetches_deferred);
  m.prefetches_declined = int(c.prefetches_declined);
  return m;
}

WorkerHostBuffers Trainer::HostBuffers() const {
  WorkerHostBuffers b;
  b.scatter = gatherer_->scatter_bytes();
  b.grad_staging = gatherer_->staging_bytes();
  b.deferred_grad = deferred_->host_bytes();
  b.embed_grad = split_->embed_grad_bytes();
  b.held_rows = split_->held_rows_bytes();
  b.optimizer_grad = lane_ ? uint64_t(lane_->grad_floats()) * sizeof(float) : 0;
  return b;
}

}  // namespace tencache
