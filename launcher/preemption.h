// Preemption: what checkpoints cost and what spot nodes are expected to cost
// once their preemptions are paid for. One model, shared by the planner (the
// plan's spot column and cluster.use_spot's ranking), the resolved job
// (train.checkpoint_every: auto) and the Kubernetes grace period's notice.
//
// The model (docs/launcher.md, "Spot pricing"): each node is preempted as a
// Poisson process at the rate its monthly interruption share gives
// (-ln(1 - share) / 730 h); any node's preemption stops the job, so the job's
// mean time between preemptions is M = 1 / (nodes x rate). After one, the job
// runs again R seconds later (cluster.restart_backoff_s + cluster.spot_restart_s
// + the checkpoint's read). Without a usable notice, the work since the last
// checkpoint is lost: an epoch of T seconds in segments of tau seconds of
// training plus C seconds of checkpoint takes (T / tau) x (M + R) x
// (e^((tau + C) / M) - 1) seconds on average, minimised near Young/Daly's
// tau = sqrt(2 C M). Where a stop's checkpoint (train.checkpoint_on_stop) fits in
// the provider's notice (StopSeconds, with its margin), nothing is lost: each
// preemption costs half a step, one checkpoint and R. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "common/job_spec.h"
#include "launcher/catalog.h"

namespace tencache {

constexpr double kHoursPerMonth = 730;

// The spot interruption notice of a provider in seconds ("aws" 120, "gcp" 30,
// "azure" 30), and where it is published; 0 and "" for an unknown provider.
int SpotNoticeSeconds(const std::string& provider, std::string* source = nullptr);

// The seconds a preempted node must be given to stop cleanly: the step in
// flight and, with a checkpoint on stop, its write, each with a margin
// (x kStopMarginFactor + kStopFixedS: process exit, volume flush, the manifest).
// Kubernetes' terminationGracePeriodSeconds is this; a stop's checkpoint saves
// the work only where it is within the provider's notice.
constexpr double kStopMarginFactor = 2.0;
constexpr int64_t kStopFixedS = 30;
int64_t StopSeconds(double step_s, double write_s);

// How long one checkpoint of a node takes: its ranks' bytes over the
// checkpoint disk's bandwidth (cluster.checkpoint_write_gbps on Kubernetes, read
// at the same rate; else one NVMe disk of the instance; else cluster.volume's).
// 0 s where unknown.
struct CheckpointTiming {
  uint64_t bytes_per_rank = 0;
  uint64_t bytes_per_node = 0;
  double write_gbps = 0;   // 0: unknown
  double read_gbps = 0;
  std::string bandwidth;   // which figure: "cluster.checkpoint_write_gbps", "one NVMe disk's write"
  double write_s = 0;
  double read_s = 0;
  bool known() const { return write_gbps > 0; }
};
// REQUIRES: ranks_per_node >= 1.
CheckpointTiming TimeCheckpoint(const JobSpec& job, const InstanceSpec& instance, int ranks_per_node,
                                uint64_t bytes_per_rank);

// The expected epoch on spot nodes of one instance type.
struct SpotEstimate {
  bool known = false;
  std::string missing;          // why not known (no spot price, no interruption rate, ...)
  double price_per_node_hour = 0;
  double monthly_share = 0;     // of nodes interrupted in a month
  std::string rate_source;      // the catalog's bucket and source, or the job key
  bool rate_assumed = false;    // from cluster.spot_interruption_rate
  double mtbp_s = 0;            // the job's mean time between preemptions
  double restart_s = 0;         // R
  int notice_s = 0;             // the provider's notice; 0: unknown
  bool notice_saves = false;    // a stop's checkpoint fits in the notice
  int checkpoint_every = 0;     // steps: the job's, or the planner's where auto
  std::string every_why;        // where auto: how it was chosen
  double preemptions = 0;       // expected per epoch
  double epoch_hours = 0;       // expected, preemptions included
  double checkpoint_hours = 0;  // of which writing checkpoints
  double lost_hours = 0;        // of which work redone, or the step a stop finishes
  double restart_hours = 0;     // of which waiting to run again
  double cost_per_epoch_usd = 0;
};

// How many periodic checkpoints an epoch of `training_s` seconds writes at one
// every `every` steps of `step_s`: training_s / min(training_s, every x step_s)
// (at least one where any is written); 0 where every <= 0. The on-demand epoch
// and the spot estimate count them the same way.
double CheckpointsPerEpoch(double training_s, double step_s, int every);

// Young/Daly's interval in steps: sqrt(2 C M) / step_s, at least 1.
// REQUIRES: checkpoint_s > 0, mtbp_s > 0, step_s > 0.
int YoungDalyEvery(double checkpoint_s, double mtbp_s, double step_s);

// `compute_hours`: the epoch without preemptions or checkpoints; `step_s`
// the step. Unknown (with `missing`) without a spot price, an interruption rate
// (the catalog's, else cluster.spot_interruption_rate), or a checkpoint
// bandwidth, or where the job is preempted sooner than it recovers.
SpotEstimate EstimateSpot(const JobSpec& job, const InstanceSpec& instance, int nodes, const CheckpointTiming& ckpt,
                          double step_s, double compute_hours);

// train.checkpoint_every on on-demand nodes: the job's number, 0 for `auto`
// (no preemptions priced, no periodic checkpoint).
int OnDemandCheckpointEvery(const JobSpec& job);

// train.checkpoint_every as a run uses it: the job's number, or for `auto`
// the spot estimate's on spot nodes (cluster.use_spot) and
// OnDemandCheckpointEvery elsewhere, with why in `*why` (empty when the job
// set a number).
int ResolveCheckpointEvery(const JobSpec& job, const SpotEstimate& spot, std::string* why);

}  // namespace tencache
