#include "launcher/resource_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/byte_size.h"
#include "common/shard_bytes.h"
#include "scheduler/plan.h"

namespace tencache {

ModelAssumptions ModelAssumptions::SlowedBy(double factor) const {
  ModelAssumptions s = *this;
  s.compute_efficiency /= factor;
  s.h2d_efficiency /= factor;
  s.collective_efficiency /= factor;
  s.nvme_efficiency /= factor;
  s.cpu_adam_params_per_s_per_vcpu /= factor;
  s.cache_copy_cpu_bps /= factor;
  s.cache_checksum_cpu_bps /= factor;
  s.collective_latency_s *= factor;
  s.block_overhead_s *= factor;
  s.step_overhead_s *= factor;
  return s;
}

namespace {

// Parameters each block needs gathered to run (index = block): the tied LM head
// reuses the token embedding in the last block.
std::vector<uint64_t> GatheredParams(const ModelShape& m) {
  std::vector<uint64_t> p = m.BlockParamCounts();
  if (m.tied_embeddings) p[m.layers + 1] += uint64_t(m.vocab) * m.hidden;
  return p;
}

uint64_t MaxGatheredParams(const ModelShape& m) {
  std::vector<uint64_t> p = GatheredParams(m);
  return *std::max_element(p.begin(), p.end());
}

}  // namespace

GpuFixedBytes GpuFixedPerRank(const ModelShape& m, DType dtype, int micro_batch, int ranks,
                              double gpu_memory_bytes, const ModelAssumptions& a) {
  const double s = m.seq_len, b = micro_batch, h = m.hidden, heads = m.heads;
  const double scale = DTypeBytes(dtype) / 2.0;  // Korthikanti et al. count 16-bit bytes
  const double checkpoints = m.layers * s * b * h * DTypeBytes(dtype);
  const double mlp_mats = m.mlp == MlpKind::kSwiGlu ? 3 : 2;
  double layer = s * b * h * (11 + 3 + 4) + mlp_mats * 2 * s * b * m.ffn_hidden;
  if (!a.flash_attention) layer += 5 * heads * s * s * b;
  layer = layer * scale + 2 * s * b * h * DTypeBytes(dtype);  // plus input/output gradients
  const double logits = s * b * m.vocab * 4.0 * 2;              // fp32 logits and their gradient
  GpuFixedBytes f;
  f.activations = static_cast<uint64_t>(checkpoints + std::max(layer, logits));
  const uint64_t gathered = MaxGatheredParams(m) * DTypeBytes(dtype);
  uint64_t largest_weight = 0;
  for (const TensorShape& t : m.TensorsOfOneLayer()) largest_weight = std::max(largest_weight, t.numel);
  // + one block's full gradient, and autograd's gradient of one weight before
  // it is added into it (DecoderModel::Backward): at most the largest weight's.
  f.working_set = gathered * a.gathered_blocks + gathered + largest_weight * DTypeBytes(dtype);
  f.staging = 2 * ((gathered + ranks - 1) / ranks);
  f.reserved = a.gpu_reserved_bytes + static_cast<uint64_t>(a.gpu_headroom_fraction * gpu_memory_bytes);
  return f;
}

double Placement::TierFraction(int tier) const {
  uint64_t total = bytes[kGpu] + bytes[kCpu] + bytes[kNvme] + unplaced;
  return total == 0 ? 0.0 : double(bytes[tier]) / double(total);
}

RankCompute RankComputeOn(const InstanceSpec& inst, const ModelAssumptions& a) {
  RankCompute r;
  r.gpu = !a.device_in_host_memory;
  r.rank_cores = std::max(1, inst.vcpus / std::max(1, inst.gpu_count));
  r.compute_threads = r.gpu ? 0 : a.cpu_compute_threads > 0 ? a.cpu_compute_threads : r.rank_cores;
  return r;
}

Placement PlaceStates(const ShardBytes& states, const std::array<uint64_t, kNumTierIndices>& capacity) {
  // Master weights and both Adam moments are read and written together by the
  // optimizer, so they are placed as one group: a parameter's optimizer state
  // lives wholly on one tier.
  enum { kParams = 0, kGrads, kOptimizer, kNumGroups };
  static const std::vector<int> kGroupClasses[kNumGroups] = {{kStateParam}, {kStateGrad}, {kStateMaster, kStateAdamM, kStateAdamV}};
  // The GPU takes what the worker's device tier holds (DeviceTierHolds: the
  // parameters); the host and NVMe take gradients first, as the host tier
  // does (scheduler/plan.h PlaceOnHost).
  static const std::vector<int> kOrder[kNumTierIndices] = {{kParams}, {kGrads, kParams, kOptimizer}, {kGrads, kParams, kOptimizer}};
  static_assert(DeviceTierHolds(kStateParam) && !DeviceTierHolds(kStateGrad) && !DeviceTierHolds(kStateMaster) &&
                    !DeviceTierHolds(kStateAdamM) && !DeviceTierHolds(kStateAdamV),
                "the GPU's fill order is the device tier's classes");
  std::array<uint64_t, kNumGroups> total{}, need{};
  for (int g = 0; g < kNumGroups; ++g) {
    for (int c : kGroupClasses[g]) total[g] += states.bytes[c];
    need[g] = total[g];
  }
  Placement p;
  for (int t = 0; t < kNumTierIndices; ++t) {
    uint64_t left = capacity[t];
    for (int g : kOrder[t]) {
      const uint64_t take = std::min(need[g], left);
      left -= take;
      need[g] -= take;
      p.bytes[t] += take;
      const int first = g == kParams ? kGpu : kCpu;  // an empty group sits where it would go first
      for (int c : kGroupClasses[g]) p.fraction[c][t] = total[g] == 0 ? (t == first ? 1.0 : 0.0) : double(take) / double(total[g]);
    }
  }
  for (uint64_t n : need) p.unplaced += n;
  return p;
}

namespace {

struct Lanes {
  double compute = 0, h2d = 0, d2h = 0, nvme = 0, coll = 0;
  double Slowest() const { return std::max({compute, h2d, d2h, nvme, coll}); }
};

// `own` is the block's own parameter count.
double BlockForwardFlops(const ModelShape& m, int block, uint64_t own, double tokens) {
  if (block == 0) return 0;  // embedding lookup
  if (block == m.layers + 1) {  // final norm and head (an untied head's matrix is in `own`)
    return (m.tied_embeddings ? 2.0 * m.vocab * m.hidden * tokens : 0.0) + 2.0 * own * tokens;
  }
  return 2.0 * own * tokens + 4.0 * tokens * m.seq_len * m.hidden;  // + attention scores
}

double BackwardFactor(const ModelShape& m, int block) {
  if (block == 0) return 0;
  return block == m.layers + 1 ? 2.0 : 3.0;  // layers recompute their forward
}

}  // namespace

double MicroStepFlops(const ModelShape& m, int micro_batch) {
  const std::vector<uint64_t> own = m.BlockParamCounts();
  const double tokens = double(micro_batch) * m.seq_len;
  double flops = 0;
  for (int blk = 0; blk < m.num_blocks(); ++blk) {
    flops += BlockForwardFlops(m, blk, own[blk], tokens) * (1 + BackwardFactor(m, blk));
  }
  return flops;
}

BlockCollectives CollectivesOfBlock(const ModelShape& m, int block) {
  // Each block is gathered in the forward and again in the backward and its
  // gradient reduce-scattered; a tied embedding is also the head, so it is
  // gathered and reduced once more; the final block (norm and head) is
  // gathered once, with the loss.
  BlockCollectives c;
  const int extra = block == 0 && m.tied_embeddings ? 1 : 0;
  c.forward_gathers = block == m.num_blocks() - 1 ? 0 : 1;
  c.backward_gathers = 1 + extra;
  c.reduce_scatters = 1 + extra;
  return c;
}

double RingCollectiveSeconds(double full_bytes, int ranks, double bus_bps, double step_latency_s) {
  if (ranks <= 1) return 0;
  return (ranks - 1) * (step_latency_s + full_bytes / ranks / bus_bps);
}

StepBreakdown EstimateStep(const JobSpec& job, const InstanceSpec& inst, const GpuSpec& gpu, int nodes,
                           const Placement& pl, const ShardBytes& states, double nvme_read_gbps,
                           double nvme_write_gbps, const ModelAssumptions& a) {
  const ModelShape& m = job.model;
  const int ranks = nodes * inst.gpu_count;
  const double wb = DTypeBytes(job.dtype);
  const double gb = double(StateElementBytes(job.dtype, kStateGrad));  // a gradient element
  const double inf = std::numeric_limits<double>::infinity();
  StepBreakdown out;
  out.accum_steps = std::max(1, job.train.global_batch / (job.train.micro_batch * ranks));
  const double tokens = double(job.train.micro_batch) * m.seq_len;
  const double peak = (job.dtype == DType::kFp32 ? gpu.fp32_tflops : gpu.bf16_tflops) * 1e12 * a.compute_efficiency;
  const double pcie = gpu.h2d_gbps * a.h2d_efficiency * 1e9;
  const double link = nodes > 1 ? std::min(gpu.p2p_gbps, inst.network_gbps / 8.0) : gpu.p2p_gbps;
  const double coll_bw = ranks > 1 ? link * a.collective_efficiency * 1e9 : inf;
  // A ring across nodes waits for the network at every step.
  const double step_latency =
      a.collective_latency_s + (nodes > 1 ? inst.network_latency_us.value_or(kAssumedNetworkLatencyUs) * 1e-6 : 0);
  const double nvme_rd = nvme_read_gbps > 0 ? nvme_read_gbps * 1e9 / inst.gpu_count : inf;
  const double nvme_wr = nvme_write_gbps > 0 ? nvme_write_gbps * 1e9 / inst.gpu_count : inf;
  const auto& f = pl.fraction;
  const double w_off = f[kStateParam][kCpu] + f[kStateParam][kNvme], w_nvme = f[kStateParam][kNvme];
  const double g_off = f[kStateGrad][kCpu] + f[kStateGrad][kNvme], g_nvme = f[kStateGrad][kNvme];
  // Computing on the CPU (the device tier simulated in host memory), the
  // reduce-scatter writes each gradient shard into host memory: no gradient
  // leaves through the device tier, so none is charged device->host.
  const double via_device = a.device_in_host_memory ? 0.0 : 1.0;
  const double g_leave = g_off * via_device;

  const std::vector<uint64_t> own = m.BlockParamCounts();
  const std::vector<uint64_t> gathered = GatheredParams(m);
  const auto k = [&](Link link) { return a.transfer_bytes_factor[static_cast<size_t>(link)]; };

  // Optimizer: CPU AdamW over the host's shards, block by block (the worker's
  // device tier holds parameters only), its PCIe and NVMe traffic overlapping
  // the arithmetic: the parameters the GPU holds go back once updated, the
  // NVMe's gradients are read and its states read and written.
  const double params_total = std::accumulate(own.begin(), own.end(), 0.0), params_rank = params_total / ranks;
  const double vcpus_per_rank = double(inst.vcpus) / inst.gpu_count;
  const double adam = params_rank / (a.cpu_adam_params_per_s_per_vcpu * vcpus_per_rank);
  // On the optimizer lane, AdamW runs on the cores the compute leaves it.
  const RankCompute compute = RankComputeOn(inst, a);
  const int lane_cores = LaneCores(compute);
  const double lane_adam =
      compute.gpu ? adam : params_rank / (a.cpu_adam_params_per_s_per_vcpu * std::max(1, lane_cores));
  const double opt_h2d = states.bytes[kStateParam] * f[kStateParam][kGpu];  // updated weights back
  double opt_rd = states.bytes[kStateGrad] * g_nvme, opt_wr = states.bytes[kStateParam] * w_nvme;
  for (int c : {kStateMaster, kStateAdamM, kStateAdamV}) {
    opt_rd += states.bytes[c] * f[c][kNvme];
    opt_wr += states.bytes[c] * f[c][kNvme];
  }
  const double opt_pcie_in = k(Link::kH2D) * opt_h2d / pcie;
  const double opt_nvme = k(Link::kNvmeRead) * opt_rd / nvme_rd + k(Link::kNvmeWrite) * opt_wr / nvme_wr;
  const double opt_io = std::max(opt_pcie_in, opt_nvme);
  // Without train.grad_clip or fp16 the worker updates each block in the
  // backward of the step's last micro-batch, once its gradient is complete: the
  // update's arithmetic on the training thread after the block's compute, its
  // shards moved by the cache beside it. The update then joins that block's
  // backward lanes, in proportion to the block's parameters: its arithmetic the
  // compute lane, its transfers theirs.
  const bool in_backward = !DeferredUpdates(job);
  // With the optimizer lane (OptimizerLaneOn: on, or auto where the compute
  // leaves a core) the updates run beside the training thread. In the
  // backward, a block's update overlaps the backward after it: each block
  // takes the longer of its backward lanes and its update on the lane's cores
  // instead of their sum. Where the compute threads take every core (a CPU
  // without a spare one) the lane only takes cores from it and hides nothing.
  // Deferred updates follow the backward: their transfers, the stored
  // gradients' reads among them, already overlap the arithmetic.
  const bool overlap = OptimizerLaneOn(job.train, compute) && lane_cores > 0;
  // Seconds of the compute cores the cache takes to move these bytes (0 where
  // its work does not run on them).
  const double per_copied = a.cache_copy_cpu_bps > 0 ? 1.0 / a.cache_copy_cpu_bps : 0.0;
  const double per_checksummed = a.cache_checksum_cpu_bps > 0 ? 1.0 / a.cache_checksum_cpu_bps : 0.0;
  const auto cache_cpu = [&](double copied, double nvme) { return copied * per_copied + nvme * per_checksummed; };
  const double opt_cpu_s = cache_cpu(k(Link::kH2D) * opt_h2d, k(Link::kNvmeRead) * opt_rd + k(Link::kNvmeWrite) * opt_wr);

  double fill = 0, sum = 0, sum_last = 0, exposed = 0, exposed_last = 0, hidden = 0;
  double h2d_bytes = 0, d2h_bytes = 0, rd_bytes = 0, wr_bytes = 0;
  for (int blk = 0; blk < m.num_blocks(); ++blk) {
    const double full = gathered[blk] * wb, shard = full / ranks, grad_shard = gathered[blk] * gb / ranks;
    const double flops = BlockForwardFlops(m, blk, own[blk], tokens);
    // This block's bytes a pass: weights in from the host and NVMe, gradients out to them.
    const double w_in = k(Link::kH2D) * shard * w_off, w_read = k(Link::kNvmeRead) * shard * w_nvme;
    const double g_out = k(Link::kD2H) * grad_shard * g_leave, g_written = k(Link::kNvmeWrite) * grad_shard * g_nvme;
    Lanes fwd;
    fwd.compute = flops / peak + a.block_overhead_s + cache_cpu(w_in, w_read);
    fwd.h2d = w_in / pcie;
    fwd.nvme = w_read / nvme_rd;
    const double ring = RingCollectiveSeconds(full, ranks, coll_bw, step_latency);
    const BlockCollectives n = CollectivesOfBlock(m, blk);
    fwd.coll = n.forward_gathers * ring;
    Lanes bwd = fwd;  // backward fetches and gathers the block again
    bwd.compute = flops * BackwardFactor(m, blk) / peak + a.block_overhead_s + cache_cpu(w_in + g_out, w_read + g_written);
    bwd.d2h = g_out / pcie;
    bwd.nvme += g_written / nvme_wr;
    // reduce-scatters of whole gradients
    bwd.coll = n.backward_gathers * ring + n.reduce_scatters * RingCollectiveSeconds(full * gb / wb, ranks,
                                                                                     coll_bw * a.reduce_scatter_bw_fraction,
                                                                                     step_latency);
    if (a.collectives_block_compute) {
      fwd.compute += fwd.coll;
      bwd.compute += bwd.coll;
      fwd.coll = bwd.coll = 0;
    }
    if (blk == 0) fill = std::max({fwd.h2d, fwd.nvme, fwd.coll});
    sum += fwd.Slowest() + bwd.Slowest();
    exposed += a.exposed_transfer_fraction * (std::max({fwd.h2d, fwd.nvme}) + std::max({bwd.h2d, bwd.d2h, bwd.nvme}));
    Lanes last = bwd;  // the backward of the step's last micro-batch, with the block's update
    double last_s = 0;
    if (in_backward) {
      const double share = params_total > 0 ? own[blk] / params_total : 0.0;
      last.h2d += share * opt_pcie_in;
      last.nvme += share * opt_nvme;
      Lanes thread = last;  // the update's arithmetic on the training thread
      thread.compute += share * (adam + opt_cpu_s);
      last_s = overlap ? std::max(last.Slowest(), share * (lane_adam + opt_cpu_s)) : thread.Slowest();
      hidden += thread.Slowest() - last_s;
      last = thread;
    } else {
      last_s = last.Slowest();
    }
    sum_last += fwd.Slowest() + last_s;
    exposed_last += a.exposed_transfer_fraction * (std::max({fwd.h2d, fwd.nvme}) + std::max({last.h2d, last.d2h, last.nvme}));
    out.compute_s += fwd.compute + bwd.compute;
    out.h2d_s += fwd.h2d + bwd.h2d;
    out.d2h_s += bwd.d2h;
    out.nvme_s += fwd.nvme + bwd.nvme;
    out.collective_s += fwd.coll + bwd.coll;
    h2d_bytes += 2 * shard * w_off;
    d2h_bytes += grad_shard * g_leave;
    rd_bytes += 2 * shard * w_nvme;
    wr_bytes += grad_shard * g_nvme;
  }
  out.micro_step_s = fill + sum + exposed;
  out.last_micro_step_s = in_backward ? fill + sum_last + exposed_last : out.micro_step_s;
  out.optimizer_io_s = opt_io;
  out.optimizer_s = in_backward ? adam : std::max(adam + opt_cpu_s, opt_io) + a.exposed_transfer_fraction * opt_io;
  out.optimizer_hidden_s = hidden;
  out.optimizer_exposed_s = std::max(0.0, adam + opt_cpu_s - hidden);
  out.step_s = (out.accum_steps - 1) * out.micro_step_s + out.last_micro_step_s +
               (in_backward ? 0.0 : out.optimizer_s) + a.step_overhead_s;
  out.bytes[Link::kH2D] = out.accum_steps * h2d_bytes + opt_h2d;
  out.bytes[Link::kD2H] = out.accum_steps * d2h_bytes;
  out.bytes[Link::kNvmeRead] = out.accum_steps * rd_bytes + opt_rd;
  out.bytes[Link::kNvmeWrite] = out.accum_steps * wr_bytes + opt_wr;
  return out;
}

namespace {

struct Storage {
  uint64_t bytes = 0;  // usable per node
  double read_gbps = 0, write_gbps = 0;
  std::string note;      // the assumption to print when the NVMe tier is needed
  bool unknown = false;  // the catalog does not know the local NVMe and none was assumed
};

// The NVMe tier of one node: the local NVMe where the catalog knows it, else the
// job's cluster.volume, else nothing. Unknown local NVMe is never taken for
// none silently: `note` then says what was assumed.
Storage NodeStorage(const JobSpec& job, const InstanceSpec& inst, const ModelAssumptions& a) {
  Storage s;
  const std::string unknown = "local NVMe unknown in the catalog for " + inst.type + ": assumed ";
  if (inst.nvme.known()) {
    s.bytes = static_cast<uint64_t>(inst.nvme.capacity_bytes() * (1 - a.nvme_reserved_fraction));
    s.read_gbps = inst.nvme.disks * inst.nvme.read_gbps_per_disk * a.nvme_efficiency;
    s.write_gbps = inst.nvme.disks * inst.nvme.write_gbps_per_disk * a.nvme_efficiency;
    if (!inst.nvme.note.empty()) s.note = inst.nvme.note;
  } else if (job.cluster.volume.size > 0) {
    s.bytes = static_cast<uint64_t>(job.cluster.volume.size * (1 - a.nvme_reserved_fraction));
    s.read_gbps = job.cluster.volume.read_gbps * a.nvme_efficiency;
    s.write_gbps = job.cluster.volume.write_gbps * a.nvme_efficiency;
    s.note = (inst.nvme.unknown() ? unknown : std::string("no local NVMe: assumed ")) + "an attached volume of " +
             FormatBytes(job.cluster.volume.size) + " per node (cluster.volume)";
  } else if (inst.nvme.unknown()) {
    s.unknown = true;
    s.note = unknown + "none (set cluster.volume to assume an attached volume)";
  }
  return s;
}

std::string Fmt(double usd) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "$%.2f", usd);
  return buf;
}

// Sets capacity for states per rank; returns a reason when a budget the user
// set cannot be honoured.
std::string SetCapacities(const JobSpec& job, const InstanceSpec& inst, const Storage& storage,
                          const ModelAssumptions& a, Candidate* c) {
  const double gpu_mem = inst.gpu_memory_gib * double(kGiB);
  const double gpu_free = a.device_in_host_memory ? gpu_mem : gpu_mem - double(c->gpu_fixed.total());
  c->capacity[kGpu] = gpu_free > 0 ? static_cast<uint64_t>(gpu_free) : 0;
  double host = inst.ram_gib * double(kGiB) * (1 - a.host_reserved_fraction) / inst.gpu_count;
  uint64_t overhead = WorkerHostBufferBytes(job, c->ranks, RankComputeOn(inst, a)).total();
  if (a.device_in_host_memory) {
    overhead += c->gpu_fixed.activations + c->gpu_fixed.working_set + static_cast<uint64_t>(gpu_mem) +
                a.host_process_bytes;
  }
  c->host_overhead_bytes = overhead;
  host -= double(overhead);
  c->capacity[kCpu] = host > 0 ? static_cast<uint64_t>(host) : 0;
  c->capacity[kNvme] = storage.bytes / inst.gpu_count;
  const std::optional<uint64_t> budgets[kNumTierIndices] = {job.cache.device_budget, job.cache.host_budget,
                                                            job.cache.nvme_budget};
  const char* keys[kNumTierIndices] = {"cache.device_budget", "cache.host_budget", "cache.nvme_budget"};
  const char* what[kNumTierIndices] = {"GPU memory left after activations and working buffers",
                                       "host memory", "NVMe"};
  for (int t = 0; t < kNumTierIndices; ++t) {
    if (!budgets[t]) continue;
    if (*budgets[t] > c->capacity[t]) {
      return std::string(keys[t]) + " " + FormatBytes(*budgets[t]) + " per rank exceeds the " +
             FormatBytes(c->capacity[t]) + " of " + what[t] + " per rank";
    }
    c->capacity[t] = *budgets[t];
  }
  return "";
}

// The worker's cache under the tencache policy refuses a host budget below
// LeastHostBudget (the slots it keeps of every shard size): a candidate
// whose host memory per rank is below it cannot run, whoever set the budget.
std::string CheckLeastHostBudget(const JobSpec& job, Candidate* c) {
  if (job.cache.policy != CachePolicy::kTencache) return "";
  const uint64_t least = LeastHostBudget(job.model, job.dtype, c->ranks);
  if (c->capacity[kCpu] >= least) return "";
  const std::string what = job.cache.host_budget ? "cache.host_budget " : "host memory ";
  return what + FormatBytes(c->capacity[kCpu]) + " per rank is below the " + FormatBytes(least) +
         " the worker's cache needs (" + std::to_string(kWorkerHostSlotsPerClass) + " slots of each shard size)";
}

std::string CheckBatch(const JobSpec& job, int ranks) {
  const int per_pass = job.train.micro_batch * ranks;
  if (job.train.global_batch % per_pass == 0) return "";
  return "train.global_batch " + std::to_string(job.train.global_batch) + " is not a multiple of ranks (" +
         std::to_string(ranks) + ") x train.micro_batch (" + std::to_string(job.train.micro_batch) + ")";
}

}  // namespace

uint64_t LeastHostBudget(const ModelShape& model, DType dtype, int ranks) {
  return LeastHostBudget(ShardTensorBytes(model, dtype, ranks).all);
}

Candidate EvaluateCandidate(const JobSpec& job, const InstanceSpec& inst, const GpuSpec& gpu, int nodes,
                            const ModelAssumptions& a) {
  Candidate c;
  c.instance = &inst;
  c.gpu = &gpu;
  c.nodes = nodes;
  c.ranks = nodes * inst.gpu_count;
  c.micro_batch = job.train.micro_batch;
  c.spot = job.cluster.use_spot;
  c.price_per_node_hour = c.spot ? inst.price_spot.value_or(0) : inst.price_on_demand;
  c.evaluated_with = a;
  c.states = ShardBytesPerRank(job.model, job.dtype, c.ranks);
  const double gpu_mem = inst.gpu_memory_gib * double(kGiB);
  c.gpu_fixed = GpuFixedPerRank(job.model, job.dtype, job.train.micro_batch, c.ranks, gpu_mem, a);
  const Storage storage = NodeStorage(job, inst, a);
  if (!inst.network_assumed.empty() && nodes > 1) c.assumptions.push_back("network: " + inst.network_assumed);
  if (!inst.network_latency_us && nodes > 1) {
    c.assumptions.push_back("network latency assumed: " + std::to_string(int(kAssumedNetworkLatencyUs)) +
                            " us per collective step between nodes (not in the catalog)");
  }

  if (c.reason = CheckBatch(job, c.ranks); !c.reason.empty()) return c;
  if (c.spot && !inst.price_spot) {
    c.reason = "no spot price in the catalog (cluster.use_spot)";
    return c;
  }
  const double hourly = c.price_per_node_hour * nodes;
  if (job.cluster.max_price_per_hour > 0 && hourly > job.cluster.max_price_per_hour) {
    c.reason = "costs " + Fmt(hourly) + "/h for " + std::to_string(nodes) + " node(s), above " +
               "cluster.max_price_per_hour " + Fmt(job.cluster.max_price_per_hour);
    return c;
  }
  if (!a.device_in_host_memory && double(c.gpu_fixed.total()) > gpu_mem) {
    c.reason = "needs " + FormatBytes(c.gpu_fixed.total()) + " GPU memory per rank for activations (" +
               FormatBytes(c.gpu_fixed.activations) + " at micro_batch " + std::to_string(job.train.micro_batch) +
               "), gathered layers (" + FormatBytes(c.gpu_fixed.working_set) + ") and reserve; has " +
               FormatBytes(gpu_mem);
    return c;
  }
  if (c.reason = SetCapacities(job, inst, storage, a, &c); !c.reason.empty()) return c;
  c.budgets = PlanCacheBudgets(job, c.ranks, c.capacity[kGpu], c.capacity[kCpu], c.capacity[kNvme]);
  c.placement = PlaceStates(c.states, c.capacity);
  if (c.placement.unplaced > 0) {
    const uint64_t need = (c.placement.bytes[kNvme] + c.placement.unplaced) * inst.gpu_count;
    const uint64_t has = c.capacity[kNvme] * inst.gpu_count;
    if (storage.unknown) {
      c.reason = "needs " + FormatBytes(need) + " NVMe per node; local NVMe unknown in the catalog " +
                 "(assumed none; set cluster.volume)";
      c.assumptions.push_back(storage.note);
      return c;
    }
    c.reason = "needs " + FormatBytes(need) + " NVMe per node, has " + (has == 0 ? "0" : FormatBytes(has));
    if (job.cache.nvme_budget) c.reason += " (cache.nvme_budget)";
    else if (inst.nvme.none() && job.cluster.volume.size == 0) c.reason += " (no local NVMe; set cluster.volume)";
    return c;
  }
  if (c.placement.bytes[kNvme] > 0 && !storage.note.empty()) c.assumptions.push_back(storage.note);
  if (c.reason = CheckLeastHostBudget(job, &c); !c.reason.empty()) return c;
  if (!c.budgets.error.empty()) {
    c.reason = c.budgets.error;
    return c;
  }
  c.feasible = true;
  c.step = EstimateStep(job, inst, gpu, nodes, c.placement, c.states, storage.read_gbps, storage.write_gbps, a);
  c.tokens_per_s = double(job.train.global_batch) * job.model.seq_len / c.step.step_s;
  const double training_hours = double(job.train.tokens_per_epoch) / c.tokens_per_s / 3600.0;
  c.checkpoint = TimeCheckpoint(job, inst, std::max(1, c.ranks / std::max(1, nodes)),
                                c.states.checkpoint(job.dtype));
  c.checkpoint_hours =
      CheckpointsPerEpoch(training_hours * 3600, c.step.step_s, OnDemandCheckpointEvery(job)) * c.checkpoint.write_s / 3600;
  c.epoch_hours = training_hours + c.checkpoint_hours;
  c.cost_per_epoch_usd = c.epoch_hours * hourly;
  c.on_demand_cost_per_epoch_usd = c.epoch_hours * inst.price_on_demand * nodes;
  c.spot_estimate = EstimateSpot(job, inst, nodes, c.checkpoint, c.step.step_s, training_hours);
  if (c.spot) {
    if (!c.spot_estimate.known) {
      c.feasible = false;
      c.reason = "spot: " + c.spot_estimate.missing + " (cluster.use_spot)";
      return c;
    }
    c.epoch_hours = c.spot_estimate.epoch_hours;
    c.cost_per_epoch_usd = c.spot_estimate.cost_per_epoch_usd;
    if (c.spot_estimate.rate_assumed) c.assumptions.push_back(c.spot_estimate.rate_source);
  }
  c.checkpoint_every = ResolveCheckpointEvery(job, c.spot_estimate, &c.checkpoint_every_why);
  return c;
}

}  // namespace tencache
