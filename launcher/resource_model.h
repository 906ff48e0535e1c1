// ResourceModel: what one rank of a job must hold under ZeRO-3, where it fits on
// an instance type x node count, how long a step takes and what an epoch costs.
//
// Memory: the five state classes of Adam (parameters, gradients, fp32 masters in
// mixed precision, two moments), each block's divided across all ranks exactly
// as the worker holds them (common/shard_bytes.h); activations with per-layer checkpointing; the largest gathered block; staging
// buffers and a stated headroom. Placement is the worker's: the GPU holds
// parameter shards only (beside its working buffers); the pinned host, then
// NVMe, take gradients, parameters, then optimizer states, which CPU AdamW
// updates.
// Time: per block and pass, the lanes compute, host->device, device->host, NVMe
// and collectives run concurrently and the block takes the slowest (as FlexGen
// models it). docs/resource-model.md gives every formula. Every efficiency and
// bandwidth not in the catalog is a field of ModelAssumptions so that later
// measurements can calibrate it. Pure functions of their inputs; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/job_spec.h"
#include "common/shard_bytes.h"
#include "common/link.h"
#include "launcher/cache_budgets.h"
#include "launcher/catalog.h"
#include "launcher/preemption.h"

namespace tencache {

struct ModelAssumptions {
  double compute_efficiency = 0.40;      // achieved / peak dense FLOP/s (MFU)
  double h2d_efficiency = 1.0;           // on top of the catalog's practical pinned bandwidth
  double collective_efficiency = 0.80;   // NCCL bus bandwidth / link bandwidth
  double nvme_efficiency = 0.90;         // O_DIRECT io_uring / rated disk bandwidth
  double gpu_headroom_fraction = 0.10;   // fragmentation, allocator slack
  uint64_t gpu_reserved_bytes = 1ull << 30;  // CUDA context, cuBLAS/NCCL workspaces
  double host_reserved_fraction = 0.20;  // OS, page cache, the framework itself
  double nvme_reserved_fraction = 0.05;  // file-system overhead
  double cpu_adam_params_per_s_per_vcpu = 1.0e8;  // vectorised CPU AdamW
  int gathered_blocks = 2;               // blocks all-gathered at once: current + prefetched
  bool flash_attention = true;           // no s^2 attention-score activations kept
  double block_overhead_s = 1.0e-4;      // kernel launches and syncs per block and pass
  double collective_latency_s = 0;       // per ring step of an all-gather / reduce-scatter (RingCollectiveSeconds)
  double reduce_scatter_bw_fraction = 1.0;  // reduce-scatter bus bandwidth over the all-gather's (NCCL: the same ring)
  double step_overhead_s = 0;            // per step, outside the blocks (data, loss, framework): measured locally
  // A machine without a GPU (the local candidate): the device tier is simulated
  // in host memory, so the "GPU memory" is the device budget alone, and
  // activations and working buffers take host RAM instead; the worker computes
  // on the CPU, so its reduce-scatters land in host memory and no gradient
  // moves device->host (EstimateStep charges none).
  bool device_in_host_memory = false;
  // There, each rank's compute threads (the probe's); 0: every core of its
  // share. The optimizer lane runs on the cores they leave (RankComputeOn).
  int cpu_compute_threads = 0;
  // There, one worker process's own resident memory beside its tiers and
  // buffers (libtorch, OpenBLAS, Open MPI, code): the host memory a rank takes
  // beyond its host budget is this plus the simulated device, activations,
  // gathered blocks and buffers (Candidate::host_overhead_bytes).
  uint64_t host_process_bytes = 1ull << 30;
  // Collectives run on the training thread (MPI on the CPU) and add to compute
  // instead of overlapping it as NCCL's own stream does.
  bool collectives_block_compute = false;
  // Where the cache's own CPU work runs on the cores the compute uses (a
  // machine without a GPU whose ranks' compute threads take every core), it
  // joins the compute lane: the simulated device's copies at this memcpy rate
  // and the CRC32C of every NVMe byte at this checksum rate, bytes/s. 0: the
  // cache's work has cores (or a DMA engine) of its own.
  double cache_copy_cpu_bps = 0;
  double cache_checksum_cpu_bps = 0;
  // Calibration from a measured run (launcher/run_report.h): the bytes the cache
  // really moved per link over what this model predicted for that run (in Link
  // order), and the share of transfer time the run did not
  // hide behind compute, which this model otherwise takes as fully hidden.
  std::array<double, kNumLinks> transfer_bytes_factor{1.0, 1.0, 1.0, 1.0};
  double exposed_transfer_fraction = 0;

  // These assumptions with every speed above divided by `factor` (each time
  // they charge multiplied by it): a run's calibration (launcher/run_report.h).
  // A speed added above belongs here too.
  ModelAssumptions SlowedBy(double factor) const;
};

// One ring all-gather or reduce-scatter of `full_bytes` (the whole gathered
// block) over `ranks`: ranks - 1 steps, each moving full_bytes / ranks over the
// slowest link at `bus_bps` bytes/s and paying `step_latency_s` (Open MPI's and
// NCCL's ring algorithm for large messages). 0 for one rank.
double RingCollectiveSeconds(double full_bytes, int ranks, double bus_bps, double step_latency_s);

// The least host budget per rank the worker's cache accepts under the tencache
// policy for `model` in `dtype` on `ranks` (scheduler/plan.h LeastHostBudget
// of its cache tensors). The worker refuses less.
uint64_t LeastHostBudget(const ModelShape& model, DType dtype, int ranks);

// The worker's collectives for block `blk` in one micro-step on more than one
// rank (what its profiled trace records as collective events): all-gathers
// in the forward and in the backward (a tied head gathers the embedding once
// more), reduce-scatters of its gradient in the backward. EstimateStep
// charges exactly these.
struct BlockCollectives {
  int forward_gathers = 0, backward_gathers = 0, reduce_scatters = 0;
};
BlockCollectives CollectivesOfBlock(const ModelShape& m, int block);

enum TierIndex { kGpu = 0, kCpu = 1, kNvme = 2, kNumTierIndices };
// The bytes one rank holds of each state class are the worker's
// (common/shard_bytes.h ShardBytesPerRank: its table, its per-rank padding).

// Forward + backward FLOPs of one micro-batch through every block, as the
// worker computes it (layers recompute their forward in the backward).
double MicroStepFlops(const ModelShape& model, int micro_batch);

// GPU memory that is not cache: activations, gathered blocks, staging, reserve.
struct GpuFixedBytes {
  uint64_t activations = 0;  // layer-input checkpoints + one layer's recompute + logits
  uint64_t working_set = 0;  // gathered blocks (weights) + one block's full gradient + the largest weight's
  uint64_t staging = 0;      // copy staging for the largest shard
  uint64_t reserved = 0;     // context + headroom
  uint64_t total() const { return activations + working_set + staging + reserved; }
};
GpuFixedBytes GpuFixedPerRank(const ModelShape& model, DType dtype, int micro_batch, int ranks,
                              double gpu_memory_bytes, const ModelAssumptions& a);

// Fraction of each state class on each tier, and the bytes per tier (per rank).
struct Placement {
  std::array<std::array<double, kNumTierIndices>, kNumStateClasses> fraction{};
  std::array<uint64_t, kNumTierIndices> bytes{};
  uint64_t unplaced = 0;  // bytes that fit nowhere
  double TierFraction(int tier) const;  // share of all state bytes on `tier`
};
// Greedy fill of whole classes' fractions: the GPU with the classes the
// worker's device tier holds (common/shard_bytes.h DeviceTierHolds: the
// parameters), then the host and NVMe with gradients, parameters, optimizer
// states. The host's order is the host tier's (scheduler/plan.h PlaceOnHost,
// which places each tensor of a trace for the simulator); this is a second
// model of it because the planner has no trace and places class fractions on
// three tiers, and checks the host tier's least budget apart
// (LeastHostBudget). With no GPU and PlaceOnHost's staging reserve taken off
// the host, both place the same bytes of every class at a budget on a tensor
// boundary (tests/launcher checks it).
Placement PlaceStates(const ShardBytes& states, const std::array<uint64_t, kNumTierIndices>& capacity);
// Where a rank of `inst` computes under `a`, for train.optimizer_overlap's
// auto and the lane's cores (common/job_spec.h OptimizerLaneOn): on its GPU
// with its vCPUs per GPU beside it, or (a.device_in_host_memory) on
// a.cpu_compute_threads of its share of the vCPUs.
RankCompute RankComputeOn(const InstanceSpec& inst, const ModelAssumptions& a);

struct StepBreakdown {
  int accum_steps = 0;        // micro-steps per optimizer step on each rank
  double compute_s = 0;       // per micro-step, sum over blocks
  double h2d_s = 0;
  double d2h_s = 0;
  double nvme_s = 0;
  double collective_s = 0;
  double micro_step_s = 0;    // with overlap: sum over blocks of the slowest lane, plus pipeline fill
  // The step's last micro-step: micro_step_s or, with updates in the
  // backward, each block's update in its backward lanes (the arithmetic in
  // compute, the transfers in theirs; on the optimizer lane, the arithmetic
  // beside them).
  double last_micro_step_s = 0;
  double optimizer_s = 0;     // the update's arithmetic; deferred updates: also its transfers beyond it
  double optimizer_io_s = 0;  // the optimizer's own transfers, the slowest link's
  // With the optimizer lane (OptimizerLaneOn): the step's seconds it takes
  // off by running the updates beside the training thread (0 without it;
  // negative where its cores compute the update slower than the training
  // thread's would), and the updates' arithmetic (with the cache's CPU work for
  // them) still on the step's path, that less the hidden seconds.
  double optimizer_hidden_s = 0;
  double optimizer_exposed_s = 0;
  // (accum_steps - 1) x micro_step_s + last_micro_step_s + overhead, and
  // optimizer_s after them where the updates are deferred.
  double step_s = 0;
  LinkBytes bytes;  // per step, per rank
};

struct Candidate {
  const InstanceSpec* instance = nullptr;
  const GpuSpec* gpu = nullptr;
  int nodes = 0;
  int ranks = 0;
  int micro_batch = 0;  // the job's, or the planner's choice where it is auto
  bool spot = false;
  double price_per_node_hour = 0;
  bool feasible = false;
  std::string reason;  // why not, when infeasible
  ShardBytes states;
  GpuFixedBytes gpu_fixed;
  std::array<uint64_t, kNumTierIndices> capacity{};  // per rank, for states
  // Per rank, the host memory a rank takes beside its host budget: the worker's
  // buffers and, where the device is simulated in host memory, the device
  // tier, activations, gathered blocks and the process itself.
  uint64_t host_overhead_bytes = 0;
  Placement placement;       // where the model places the states (for the step time)
  // What the worker's cache gets per rank: the one figure shown. Set once the
  // capacities are (an infeasible candidate may have them, and their error).
  CacheBudgets budgets;
  StepBreakdown step;
  double tokens_per_s = 0;
  // The epoch as the objective ranks it: on spot nodes (cluster.use_spot) the
  // expected one, preemptions included (`spot_estimate`), else on-demand:
  // training and the periodic checkpoints of train.checkpoint_every.
  double epoch_hours = 0;
  double cost_per_epoch_usd = 0;
  double on_demand_cost_per_epoch_usd = 0;  // training and periodic checkpoints at the on-demand price
  double checkpoint_hours = 0;              // on demand, of which writing periodic checkpoints
  CheckpointTiming checkpoint;              // one checkpoint of a node
  SpotEstimate spot_estimate;               // the same epoch on spot nodes (side by side)
  int checkpoint_every = 0;                 // train.checkpoint_every as the run uses it
  std::string checkpoint_every_why;         // where the job said auto: how it was chosen
  std::vector<std::string> assumptions;  // e.g. assumed NVMe bandwidth, network
  ModelAssumptions evaluated_with;       // what EvaluateCandidate was given (a calibration re-evaluates with it)
};

// Everything the model says about `job` on `nodes` x `instance`.
// REQUIRES: job.train.micro_batch > 0 (the planner resolves auto first).
Candidate EvaluateCandidate(const JobSpec& job, const InstanceSpec& instance, const GpuSpec& gpu,
                            int nodes, const ModelAssumptions& a);

// Step time for a given placement (exposed for tests and calibration).
StepBreakdown EstimateStep(const JobSpec& job, const InstanceSpec& instance, const GpuSpec& gpu,
                           int nodes, const Placement& placement, const ShardBytes& states,
                           double nvme_read_gbps, double nvme_write_gbps, const ModelAssumptions& a);

}  // namespace tencache
