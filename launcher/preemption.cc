#include "launcher/preemption.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/human_format.h"

namespace tencache {

int SpotNoticeSeconds(const std::string& provider, std::string* source) {
  struct Notice {
    const char* provider;
    int seconds;
    const char* source;
  };
  static const Notice kNotices[] = {
      {"aws", 120, "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html"},
      {"gcp", 30, "https://cloud.google.com/compute/docs/instances/spot#preemption"},
      {"azure", 30, "https://learn.microsoft.com/azure/virtual-machines/spot-vms (Scheduled Events: 30 s)"},
  };
  for (const Notice& n : kNotices) {
    if (provider == n.provider) {
      if (source != nullptr) *source = n.source;
      return n.seconds;
    }
  }
  if (source != nullptr) source->clear();
  return 0;
}

int64_t StopSeconds(double step_s, double write_s) {
  return int64_t(std::ceil(kStopMarginFactor * (step_s + write_s))) + kStopFixedS;
}

CheckpointTiming TimeCheckpoint(const JobSpec& job, const InstanceSpec& instance, int ranks_per_node,
                                uint64_t bytes_per_rank) {
  CheckpointTiming t;
  t.bytes_per_rank = bytes_per_rank;
  t.bytes_per_node = bytes_per_rank * uint64_t(std::max(1, ranks_per_node));
  if (job.cluster.target == Target::kK8s) {
    t.write_gbps = t.read_gbps = job.cluster.k8s.checkpoint_write_gbps;
    t.bandwidth = "cluster.checkpoint_write_gbps";
  } else if (instance.nvme.write_gbps_per_disk > 0) {
    t.write_gbps = instance.nvme.write_gbps_per_disk;
    t.read_gbps = instance.nvme.read_gbps_per_disk > 0 ? instance.nvme.read_gbps_per_disk : t.write_gbps;
    t.bandwidth = "one NVMe disk's write";
  } else if (job.cluster.volume.size > 0) {
    t.write_gbps = job.cluster.volume.write_gbps;
    t.read_gbps = job.cluster.volume.read_gbps;
    t.bandwidth = "cluster.volume's write";
  }
  if (t.known()) {
    t.write_s = double(t.bytes_per_node) / (t.write_gbps * 1e9);
    t.read_s = double(t.bytes_per_node) / (t.read_gbps * 1e9);
  }
  return t;
}

int YoungDalyEvery(double checkpoint_s, double mtbp_s, double step_s) {
  const double steps = std::sqrt(2 * checkpoint_s * mtbp_s) / step_s;
  return int(std::clamp(std::llround(steps), 1LL, 2147483647LL));
}

namespace {

std::string Share(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g %%", 100 * s);
  return buf;
}

}  // namespace

SpotEstimate EstimateSpot(const JobSpec& job, const InstanceSpec& inst, int nodes, const CheckpointTiming& ckpt,
                          double step_s, double compute_hours) {
  SpotEstimate e;
  if (!inst.price_spot) {
    e.missing = "no spot price in the catalog";
    return e;
  }
  e.price_per_node_hour = *inst.price_spot;
  if (inst.spot_interruption) {
    e.monthly_share = inst.spot_interruption->monthly;
    e.rate_source = "spot interruptions " +
                    (inst.spot_interruption->bucket.empty() ? Share(e.monthly_share) : inst.spot_interruption->bucket) +
                    " of nodes a month (" + inst.spot_interruption->source + ")";
  } else if (job.cluster.spot_interruption_rate > 0) {
    e.monthly_share = job.cluster.spot_interruption_rate;
    e.rate_assumed = true;
    e.rate_source = "spot interruptions assumed " + Share(e.monthly_share) +
                    " of nodes a month (cluster.spot_interruption_rate; the catalog has none)";
  } else {
    e.missing = "no spot interruption rate in the catalog (set cluster.spot_interruption_rate)";
    return e;
  }
  if (!ckpt.known()) {
    e.missing = "the checkpoint disk's bandwidth is unknown, so neither a checkpoint's cost nor a restart's is";
    return e;
  }
  const double node_rate_per_s = -std::log1p(-e.monthly_share) / (kHoursPerMonth * 3600);
  e.mtbp_s = 1 / (node_rate_per_s * std::max(1, nodes));
  e.restart_s = job.cluster.restart_backoff_s + job.cluster.spot_restart_s + ckpt.read_s;
  e.notice_s = SpotNoticeSeconds(inst.provider);
  e.notice_saves = job.train.checkpoint_on_stop && e.notice_s > 0 && StopSeconds(step_s, ckpt.write_s) <= e.notice_s;
  const double T = compute_hours * 3600;
  if (job.train.checkpoint_every != kCheckpointEveryAuto) {
    e.checkpoint_every = job.train.checkpoint_every;
  } else if (e.notice_saves) {
    e.checkpoint_every = 0;
    e.every_why = "planned: no periodic checkpoint on spot nodes: a stop's checkpoint (" + FormatDuration(step_s) +
                  " step + " + FormatDuration(ckpt.write_s) + " write, with margin " +
                  std::to_string(StopSeconds(step_s, ckpt.write_s)) + " s) fits in the " + inst.provider + " " +
                  std::to_string(e.notice_s) + " s preemption notice";
  } else {
    e.checkpoint_every = YoungDalyEvery(ckpt.write_s, e.mtbp_s, step_s);
    e.every_why = "planned: Young/Daly sqrt(2 x " + FormatDuration(ckpt.write_s) + " checkpoint x " +
                  FormatDuration(e.mtbp_s) + " between preemptions) / " + FormatDuration(step_s) + " a step";
  }
  const bool periodic = e.checkpoint_every > 0;
  const double tau = periodic ? std::min(T, e.checkpoint_every * step_s) : T;  // training per segment
  const double segments = periodic ? CheckpointsPerEpoch(T, step_s, e.checkpoint_every) : (T > 0 ? 1 : 0);
  const double periodic_c = periodic ? ckpt.write_s : 0;
  double total = 0;
  if (e.notice_saves) {
    const double per_preemption = e.restart_s + ckpt.write_s + step_s / 2;
    if (per_preemption >= e.mtbp_s) {
      e.missing = "preempted every " + FormatDuration(e.mtbp_s) + " on average, sooner than it recovers (" +
                  FormatDuration(per_preemption) + ")";
      return e;
    }
    total = (T + segments * periodic_c) / (1 - per_preemption / e.mtbp_s);
    e.preemptions = total / e.mtbp_s;
    e.checkpoint_hours = (segments * periodic_c + e.preemptions * ckpt.write_s) / 3600;
    e.lost_hours = e.preemptions * step_s / 2 / 3600;
    e.restart_hours = e.preemptions * e.restart_s / 3600;
  } else {
    const double x = (tau + periodic_c) / e.mtbp_s;
    if (x > 30) {
      e.missing = "a stretch of " + FormatDuration(tau + periodic_c) + " between checkpoints outlasts the " +
                  FormatDuration(e.mtbp_s) + " between preemptions many times over: it would almost never finish "
                  "(train.checkpoint_every)";
      return e;
    }
    e.preemptions = segments * std::expm1(x);
    total = segments * (e.mtbp_s + e.restart_s) * std::expm1(x);
    e.checkpoint_hours = segments * periodic_c / 3600;
    e.restart_hours = e.preemptions * e.restart_s / 3600;
    e.lost_hours = std::max(0.0, total / 3600 - compute_hours - e.checkpoint_hours - e.restart_hours);
  }
  e.epoch_hours = total / 3600;
  e.cost_per_epoch_usd = e.epoch_hours * e.price_per_node_hour * nodes;
  e.known = true;
  return e;
}

double CheckpointsPerEpoch(double training_s, double step_s, int every) {
  if (every <= 0 || training_s <= 0) return 0;
  return training_s / std::min(training_s, every * step_s);
}

int OnDemandCheckpointEvery(const JobSpec& job) {
  return job.train.checkpoint_every == kCheckpointEveryAuto ? 0 : job.train.checkpoint_every;
}

int ResolveCheckpointEvery(const JobSpec& job, const SpotEstimate& spot, std::string* why) {
  why->clear();
  if (job.train.checkpoint_every != kCheckpointEveryAuto) return job.train.checkpoint_every;
  if (job.cluster.use_spot && spot.known) {
    *why = spot.every_why;
    return spot.checkpoint_every;
  }
  *why = job.cluster.use_spot ? "planned: 0 (the spot cost is unknown: " + spot.missing + ")"
                              : "planned: no periodic checkpoint off spot nodes (no preemptions priced)" +
                                    std::string(job.train.checkpoint_on_stop ? "; a stop writes one" : "");
  return OnDemandCheckpointEvery(job);
}

}  // namespace tencache
