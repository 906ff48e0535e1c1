#include "launcher/resource_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common/byte_size.h"
#include "common/shard_bytes.h"
#include "scheduler/plan.h"
#include "tests/common/big_vocab_shape.h"

namespace tencache {
namespace {

class ResourceModelTest : public ::testing::Test {
 protected:
  void SetUp() override { catalog_ = *Catalog::Load(DefaultCatalogPath()); }

  JobSpec Job(const std::string& preset, int micro, int global) {
    JobSpec job;
    job.name = "t";
    job.source = "test.yaml";
    job.model = *FindPreset(preset);
    job.train.micro_batch = micro;
    job.train.global_batch = global;
    job.train.tokens_per_epoch = 1000000000;
    return job;
  }
  Candidate Eval(const JobSpec& job, const std::string& type, int nodes) {
    const InstanceSpec* inst = *catalog_.FindInstance(type);
    return EvaluateCandidate(job, *inst, *catalog_.FindGpu(inst->gpu), nodes, ModelAssumptions());
  }

  Catalog catalog_;
};

TEST(RingCollective, RanksMinusOneStepsOfLatencyAndAShareOfTheBytes) {
  EXPECT_EQ(RingCollectiveSeconds(1e9, 1, 1e9, 1e-3), 0);
  // 4 ranks: 3 steps, each 250 MB at 1 GB/s plus 1 ms.
  EXPECT_NEAR(RingCollectiveSeconds(1e9, 4, 1e9, 1e-3), 3 * (1e-3 + 0.25), 1e-12);
  // Latency-bound: a 4-byte gather over 3 ranks is two latencies.
  EXPECT_NEAR(RingCollectiveSeconds(4, 3, 1e9, 50e-6), 100e-6, 1e-8);
}

// The planner's states are the worker's shards: 18 bytes per parameter in
// mixed precision (fp32 gradients), 16 in fp32, each block's split across ranks.
TEST_F(ResourceModelTest, AdamStatesAreTheWorkersBytesPerParameterDividedAcrossRanks) {
  JobSpec job = Job("gpt2", 1, 8);
  const uint64_t params = job.model.ParamCount();
  Candidate one = Eval(job, "p5.4xlarge", 1);
  EXPECT_EQ(one.states.total(), 18 * params);
  EXPECT_EQ(one.states.bytes[kStateParam], 2 * params);
  EXPECT_EQ(one.states.bytes[kStateGrad], 4 * params);
  EXPECT_EQ(one.states.bytes[kStateMaster], 4 * params);
  EXPECT_EQ(one.states.bytes[kStateAdamM], 4 * params);
  EXPECT_EQ(one.states.bytes[kStateAdamV], 4 * params);
  uint64_t per_rank = 0;  // elements of one rank's shards: every block's padded to a multiple of 8
  for (uint64_t n : job.model.BlockParamCounts()) per_rank += (n + 7) / 8;
  job.dtype = DType::kFp16;
  EXPECT_EQ(Eval(job, "p5.48xlarge", 1).states.total(), 18 * per_rank);
  job.dtype = DType::kFp32;
  const Candidate fp32 = Eval(job, "p5.48xlarge", 1);
  EXPECT_EQ(fp32.states.bytes[kStateMaster], 0u);
  EXPECT_EQ(fp32.states.total(), 16 * per_rank);
}

// The GPU holds what the worker's device tier holds, the parameters; room it
// has beyond them stays empty. The host takes gradients, the rest of the
// parameters, then optimizer states; NVMe the rest.
TEST_F(ResourceModelTest, PlacementFillsGpuWithParametersThenHostThenNvme) {
  ShardBytes s;
  s.bytes = {2000, 2000, 4000, 4000, 4000};
  Placement p = PlaceStates(s, {3000, 6000, 100000});
  EXPECT_DOUBLE_EQ(p.fraction[kStateParam][kGpu], 1.0);
  EXPECT_DOUBLE_EQ(p.fraction[kStateGrad][kGpu], 0.0);
  EXPECT_DOUBLE_EQ(p.fraction[kStateGrad][kCpu], 1.0);
  // The optimizer group (master, m, v: 12000 bytes) shares one split: 4000 on
  // the host, 8000 on NVMe.
  for (int c : {kStateMaster, kStateAdamM, kStateAdamV}) {
    EXPECT_DOUBLE_EQ(p.fraction[c][kGpu], 0.0);
    EXPECT_DOUBLE_EQ(p.fraction[c][kCpu], 4000.0 / 12000.0);
    EXPECT_DOUBLE_EQ(p.fraction[c][kNvme], 8000.0 / 12000.0);
  }
  EXPECT_EQ(p.bytes[kGpu], 2000u);
  EXPECT_EQ(p.bytes[kCpu], 6000u);
  EXPECT_EQ(p.bytes[kNvme], 8000u);
  EXPECT_EQ(p.unplaced, 0u);
  // A GPU smaller than the parameters: the host takes the gradients, then the rest of them.
  p = PlaceStates(s, {500, 6000, 100000});
  EXPECT_DOUBLE_EQ(p.fraction[kStateParam][kGpu], 0.25);
  EXPECT_DOUBLE_EQ(p.fraction[kStateParam][kCpu], 0.75);
  EXPECT_DOUBLE_EQ(p.fraction[kStateGrad][kCpu], 1.0);
  EXPECT_DOUBLE_EQ(p.fraction[kStateAdamM][kCpu], 2500.0 / 12000.0);
  EXPECT_EQ(p.bytes[kNvme], 9500u);
  Placement short_of_space = PlaceStates(s, {1000, 1000, 1000});
  EXPECT_EQ(short_of_space.unplaced, 13000u);
}

// The planner's host placement (PlaceStates, class fractions) and the
// simulator's (PlaceOnHost, whole tensors) are one order: with no GPU and the
// staging reserve taken off the host, they keep the same bytes of every class
// on the host and on NVMe at every budget on a tensor boundary.
TEST(PlaceStates, PlacesOnTheHostAsTheSimulatorsHostTierDoes) {
  for (const char* preset : {"gpt2", "llama-2-7b"}) {
    const ModelShape m = *FindPreset(preset);
    for (DType dtype : {DType::kFp32, DType::kBf16, DType::kFp16}) {
      for (int ranks : {1, 3, 8}) {
        SCOPED_TRACE(std::string(preset) + " " + DTypeName(dtype) + " ranks " + std::to_string(ranks));
        const std::vector<uint64_t> params = ShardTensorBytes(m, dtype, ranks).params;
        const ShardBytes states = ShardBytesPerRank(m, dtype, ranks);
        const uint64_t staging = 2 * *std::max_element(params.begin(), params.end());
        // Budgets on every tensor boundary: gradients, then parameters, then optimizer states, block by block.
        std::vector<uint64_t> budgets = {staging};
        uint64_t state_elem = 0;  // bytes of an element's master and moments
        for (int c : {kStateMaster, kStateAdamM, kStateAdamV}) state_elem += StateElementBytes(dtype, c);
        for (uint64_t per_elem : {StateElementBytes(dtype, kStateGrad), StateElementBytes(dtype, kStateParam), state_elem}) {
          for (uint64_t b : params) budgets.push_back(budgets.back() + b / StateElementBytes(dtype, kStateParam) * per_elem);
        }
        for (uint64_t budget : budgets) {
          const HostPlacement sim = PlaceOnHost(params, dtype, budget);
          const Placement plan = PlaceStates(states, {0, budget - staging, UINT64_MAX / 4});
          EXPECT_EQ(plan.bytes[kCpu] + staging, sim.host_used()) << budget;
          for (int c = 0; c < kNumStateClasses; ++c) {
            EXPECT_NEAR(plan.fraction[c][kCpu] * double(states.bytes[c]), double(sim.host[c]), 1.0) << StateClassName(c) << " " << budget;
            EXPECT_NEAR(plan.fraction[c][kNvme] * double(states.bytes[c]), double(sim.nvme[c]), 1.0) << StateClassName(c) << " " << budget;
          }
        }
      }
    }
  }
}

TEST_F(ResourceModelTest, FitsOnGpu) {
  Candidate c = Eval(Job("gpt2", 8, 8), "p5.4xlarge", 1);
  ASSERT_TRUE(c.feasible) << c.reason;
  // The parameters stay on the GPU; gradients and optimizer states on the host.
  EXPECT_DOUBLE_EQ(c.placement.fraction[kStateParam][kGpu], 1.0);
  for (int k : {kStateGrad, kStateMaster, kStateAdamM, kStateAdamV}) {
    EXPECT_DOUBLE_EQ(c.placement.fraction[k][kCpu], 1.0) << StateClassName(k);
  }
  EXPECT_EQ(c.placement.bytes[kGpu], c.states.bytes[kStateParam]);
  EXPECT_EQ(c.step.h2d_s, 0.0);  // no weight is fetched by a pass
  // Every fp32 gradient leaves the GPU, the tied embedding's twice (the head's contribution too).
  EXPECT_DOUBLE_EQ(c.step.bytes[Link::kD2H], 4.0 * (double(c.states.bytes[kStateParam]) / 2 + 50257.0 * 768));
  EXPECT_EQ(c.step.collective_s, 0.0);  // one rank
}

TEST_F(ResourceModelTest, NeedsHostMemory) {
  Candidate c = Eval(Job("llama-2-7b", 1, 8), "p5.4xlarge", 1);  // 100 GiB of states, 80 GiB GPU
  ASSERT_TRUE(c.feasible) << c.reason;
  EXPECT_GT(c.placement.bytes[kCpu], 0u);
  EXPECT_EQ(c.placement.bytes[kNvme], 0u);
  // Weights stay on the GPU; the optimizer runs on the CPU and sends them back.
  EXPECT_DOUBLE_EQ(c.placement.fraction[kStateParam][kGpu], 1.0);
  EXPECT_GT(c.step.bytes[Link::kH2D], 0.0);
  EXPECT_GT(c.step.optimizer_s, 0.0);
  EXPECT_EQ(c.placement.bytes[kGpu] + c.placement.bytes[kCpu], c.states.total());
}

TEST_F(ResourceModelTest, NeedsNvme) {
  Candidate c = Eval(Job("llama-2-7b", 1, 8), "g6.2xlarge", 1);  // 32 GiB RAM, 450 GB NVMe
  ASSERT_TRUE(c.feasible) << c.reason;
  EXPECT_GT(c.placement.bytes[kNvme], 0u);
  EXPECT_GT(c.step.bytes[Link::kNvmeRead], 0.0);
  EXPECT_GT(c.step.bytes[Link::kNvmeWrite], 0.0);
  EXPECT_FALSE(c.assumptions.empty());  // the NVMe bandwidth is assumed and says so
}

// The worker's cache keeps three host slots of every shard size: a host whose
// memory per rank is below that is infeasible, named, whatever the model
// places (Llama-2 7B on one g5.xlarge, 16 GiB, with 60 % of it kept for the OS).
TEST_F(ResourceModelTest, HostMemoryBelowWhatTheWorkerNeedsIsInfeasible) {
  const JobSpec job = Job("llama-2-7b", 1, 8);
  ModelAssumptions a;
  a.host_reserved_fraction = 0.6;
  const InstanceSpec* inst = *catalog_.FindInstance("g5.xlarge");
  const Candidate c = EvaluateCandidate(job, *inst, *catalog_.FindGpu(inst->gpu), 1, a);
  EXPECT_FALSE(c.feasible);
  EXPECT_LT(c.capacity[kCpu], LeastHostBudget(job.model, job.dtype, 1));
  EXPECT_EQ(c.reason, "host memory " + FormatBytes(c.capacity[kCpu]) + " per rank is below the " +
                          FormatBytes(LeastHostBudget(job.model, job.dtype, 1)) + " the worker's cache needs (3 slots of "
                          "each shard size)");
  // With the default 20 % kept, its 12 GiB hold them: gradients and states spill to NVMe.
  const Candidate fits = Eval(job, "g5.xlarge", 1);
  ASSERT_TRUE(fits.feasible) << fits.reason;
  EXPECT_GT(fits.placement.fraction[kStateGrad][kNvme], 0.0);
}

TEST_F(ResourceModelTest, InfeasibleWithTheExactShortfall) {
  JobSpec job = Job("llama-2-7b", 1, 8);
  Candidate c = Eval(job, "g2-standard-12", 1);  // no local NVMe, no volume
  ASSERT_FALSE(c.feasible);
  const uint64_t need = c.states.total() - c.placement.bytes[kGpu] - c.placement.bytes[kCpu];
  EXPECT_EQ(c.reason, "needs " + FormatBytes(need) + " NVMe per node, has 0 (no local NVMe; set cluster.volume)");
  job.cluster.volume.size = 2 * kTiB;
  EXPECT_TRUE(Eval(job, "g2-standard-12", 1).feasible);
}

TEST_F(ResourceModelTest, ActivationsThatDoNotFitTheGpu) {
  Candidate c = Eval(Job("bloom-7b1", 64, 64), "g6.2xlarge", 1);  // 250k vocab logits at micro_batch 64
  ASSERT_FALSE(c.feasible);
  EXPECT_NE(c.reason.find("GPU memory per rank for activations"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("micro_batch 64"), std::string::npos) << c.reason;
}

TEST_F(ResourceModelTest, BudgetsAndBatchAndPriceChecks) {
  JobSpec job = Job("gpt2", 8, 8);
  job.cache.device_budget = 200 * kGiB;
  Candidate c = Eval(job, "p5.4xlarge", 1);
  EXPECT_NE(c.reason.find("cache.device_budget 200 GiB per rank exceeds"), std::string::npos) << c.reason;
  job.cache.device_budget = 100 * kMiB;  // an explicit small budget pushes states to the host
  c = Eval(job, "p5.4xlarge", 1);
  ASSERT_TRUE(c.feasible);
  EXPECT_EQ(c.placement.bytes[kGpu], 100 * kMiB);
  EXPECT_NE(Eval(Job("gpt2", 8, 8), "p5.48xlarge", 1).reason.find("not a multiple of ranks (8)"), std::string::npos);
  job = Job("gpt2", 8, 8);
  job.cluster.max_price_per_hour = 5;
  EXPECT_NE(Eval(job, "p5.4xlarge", 1).reason.find("above cluster.max_price_per_hour $5.00"), std::string::npos);
  job.cluster.max_price_per_hour = 0;
  job.cluster.use_spot = true;
  EXPECT_NE(Eval(job, "p5.4xlarge", 1).reason.find("no spot price"), std::string::npos);
}

TEST_F(ResourceModelTest, CostArithmetic) {
  JobSpec job = Job("llama-2-13b", 1, 64);
  Candidate c = Eval(job, "p4d.24xlarge", 2);
  ASSERT_TRUE(c.feasible) << c.reason;
  EXPECT_EQ(c.ranks, 16);
  EXPECT_EQ(c.step.accum_steps, 4);
  EXPECT_DOUBLE_EQ(c.tokens_per_s, 64.0 * 4096 / c.step.step_s);
  EXPECT_DOUBLE_EQ(c.epoch_hours, 1e9 / c.tokens_per_s / 3600);
  EXPECT_NEAR(c.cost_per_epoch_usd, c.epoch_hours * 21.96 * 2, 1e-9);
  EXPECT_EQ(c.checkpoint_hours, 0);
  // Periodic checkpoints are paid for on demand too: an epoch of T seconds writes
  // T / (every x step) of them, C each.
  const double training_s = 1e9 / c.tokens_per_s;
  ASSERT_TRUE(c.checkpoint.known());
  for (int every : {1, 50, 1000000}) {
    JobSpec periodic = job;
    periodic.train.checkpoint_every = every;
    const Candidate p = Eval(periodic, "p4d.24xlarge", 2);
    const double count = std::max(1.0, training_s / (every * c.step.step_s));
    EXPECT_NEAR(p.checkpoint_hours * 3600, count * p.checkpoint.write_s, 1e-6) << "every " << every;
    EXPECT_NEAR(p.epoch_hours, c.epoch_hours + p.checkpoint_hours, 1e-12) << "every " << every;
    EXPECT_NEAR(p.on_demand_cost_per_epoch_usd, p.epoch_hours * 21.96 * 2, 1e-9);
    EXPECT_GT(p.cost_per_epoch_usd, c.cost_per_epoch_usd);
  }
  JobSpec automatic = job;  // auto off spot nodes writes none
  automatic.train.checkpoint_every = kCheckpointEveryAuto;
  EXPECT_DOUBLE_EQ(Eval(automatic, "p4d.24xlarge", 2).epoch_hours, c.epoch_hours);
  ASSERT_FALSE(DeferredUpdates(job));  // the updates run in the last micro-step's backward
  EXPECT_DOUBLE_EQ(c.step.step_s, (c.step.accum_steps - 1) * c.step.micro_step_s + c.step.last_micro_step_s);
  job.train.grad_clip = 1.0;  // deferred: after the backward
  c = Eval(job, "p4d.24xlarge", 2);
  EXPECT_DOUBLE_EQ(c.step.step_s, c.step.accum_steps * c.step.micro_step_s + c.step.optimizer_s);
}

// Updates in the backward: the optimizer's arithmetic and NVMe traffic ride in
// the last micro-step's backward lanes, each hidden where another lane is
// slower; deferred (train.grad_clip), they follow the backward.
TEST_F(ResourceModelTest, UpdatesInTheBackwardHideTheirTransfersBehindCompute) {
  JobSpec job = Job("llama-2-7b", 1, 8);  // 121 GB of states: on one g6.2xlarge, mostly on NVMe
  Candidate in_backward = Eval(job, "g6.2xlarge", 1);
  ASSERT_TRUE(in_backward.feasible) << in_backward.reason;
  const StepBreakdown& s = in_backward.step;
  ASSERT_GT(s.optimizer_io_s, 0.0);
  EXPECT_GE(s.last_micro_step_s, s.micro_step_s);
  EXPECT_LT(s.last_micro_step_s - s.micro_step_s, s.optimizer_io_s + s.optimizer_s);  // some of it hidden
  job.train.grad_clip = 1.0;
  Candidate deferred = Eval(job, "g6.2xlarge", 1);
  ASSERT_TRUE(deferred.feasible) << deferred.reason;
  EXPECT_DOUBLE_EQ(deferred.step.last_micro_step_s, deferred.step.micro_step_s);
  EXPECT_GE(deferred.step.optimizer_s, deferred.step.optimizer_io_s);
  EXPECT_LT(s.optimizer_s, s.optimizer_io_s);
  EXPECT_LT(s.step_s, deferred.step.step_s);
}

TEST_F(ResourceModelTest, LanesOverlapPerBlock) {
  Candidate c = Eval(Job("llama-2-7b", 1, 8), "g6.2xlarge", 1);
  ASSERT_TRUE(c.feasible);
  const StepBreakdown& s = c.step;
  const double slowest = std::max({s.compute_s, s.h2d_s, s.d2h_s, s.nvme_s, s.collective_s});
  const double serial = s.compute_s + s.h2d_s + s.d2h_s + s.nvme_s + s.collective_s;
  EXPECT_GE(s.micro_step_s, slowest);
  EXPECT_LT(s.micro_step_s, serial);
}

TEST_F(ResourceModelTest, ComputeBoundStepRecomputedByHand) {
  // gpt2 on one H100, its parameters on the GPU: the step is the compute of
  // every block (forward 2*P*T plus attention 4*T*s*h; backward 3x with
  // recompute; the LM head 2*V*h*T forward, 2x backward) at 989 TFLOP/s x 0.40,
  // plus 1e-4 s per block and pass, plus CPU AdamW over every parameter (1e8
  // parameters/s per vCPU, 16 vCPUs) inside the backward; every transfer (the
  // fp32 gradients out, the updated weights back, over 50 GB/s PCIe) is hidden
  // under a block's compute. The updates on the training thread
  // (train.optimizer_overlap off).
  JobSpec job = Job("gpt2", 8, 8);
  job.train.optimizer_overlap = OptimizerOverlap::kOff;
  Candidate c = Eval(job, "p5.4xlarge", 1);
  ASSERT_TRUE(c.feasible);
  const ModelShape& m = job.model;
  const double T = 8.0 * 1024, peak = 989e12 * 0.40;
  const double layer = 2.0 * m.BlockParams(1) * T + 4.0 * T * 1024 * 768;
  const double head = 2.0 * 50257 * 768 * T + 2.0 * m.BlockParams(13) * T;
  const double compute = (12 * layer * 4 + head * 3) / peak + 14 * 2 * 1e-4;
  const double optimizer = m.ParamCount() / (1e8 * 16);
  EXPECT_NEAR(c.step.step_s, compute + optimizer, 1e-9);
  EXPECT_NEAR(c.step.d2h_s, 4.0 * (m.ParamCount() + 50257.0 * 768) / 50e9, 1e-12);
}

// train.optimizer_overlap on (and auto): each block's update runs on the
// optimizer lane beside the backward, the block taking the longer of the two:
// gpt2 on one H100 is compute-bound, so every update is hidden but where it
// is longer than its block's backward. Never slower than off, never faster
// than without updates; what it hides is the step's difference.
TEST_F(ResourceModelTest, OptimizerOverlapHidesEachUpdateBehindTheBackward) {
  JobSpec job = Job("gpt2", 8, 8);
  StepBreakdown step[3];
  const OptimizerOverlap modes[3] = {OptimizerOverlap::kOff, OptimizerOverlap::kOn, OptimizerOverlap::kAuto};
  for (int i = 0; i < 3; ++i) {
    job.train.optimizer_overlap = modes[i];
    Candidate c = Eval(job, "p5.4xlarge", 1);
    ASSERT_TRUE(c.feasible) << c.reason;
    step[i] = c.step;
  }
  const StepBreakdown &off = step[0], &on = step[1];
  EXPECT_EQ(off.optimizer_hidden_s, 0.0);
  EXPECT_DOUBLE_EQ(off.optimizer_exposed_s, off.optimizer_s);
  EXPECT_LT(on.step_s, off.step_s);
  EXPECT_DOUBLE_EQ(step[2].step_s, on.step_s);  // auto plans as on
  EXPECT_NEAR(on.step_s, off.step_s - on.optimizer_hidden_s, 1e-12);
  EXPECT_GE(on.step_s, off.step_s - off.optimizer_s - 1e-12);
  EXPECT_NEAR(on.optimizer_hidden_s + on.optimizer_exposed_s, off.optimizer_s, 1e-12);
  EXPECT_GT(on.optimizer_exposed_s, 0.0);  // the embedding's update has no backward compute to hide behind
  EXPECT_EQ(on.micro_step_s, off.micro_step_s);  // only the last micro-step updates
  EXPECT_EQ(on.optimizer_s, off.optimizer_s);
}

// Where there is no backward to hide an update behind, the lane hides
// nothing: deferred updates (train.grad_clip) follow the whole backward, their
// transfers, the stored gradients' reads among them, already overlapping the
// arithmetic; and where the compute runs on the CPU (no GPU) the lane would
// take its cores. What the lane costs remains: its gradient buffer's host
// memory, which the states then cannot use.
TEST_F(ResourceModelTest, OptimizerOverlapHidesNothingWithoutABackwardToHideBehind) {
  const InstanceSpec* inst = *catalog_.FindInstance("g6.2xlarge");
  for (const bool cpu : {false, true}) {
    // llama-2-7b: mostly on NVMe on one g6.2xlarge, gradients included.
    JobSpec job = Job(cpu ? "gpt2" : "llama-2-7b", 1, 8);
    ModelAssumptions a;
    a.device_in_host_memory = cpu;
    job.train.grad_clip = cpu ? 0.0 : 1.0;
    Candidate c[2];
    for (int i = 0; i < 2; ++i) {
      job.train.optimizer_overlap = i == 0 ? OptimizerOverlap::kOff : OptimizerOverlap::kOn;
      c[i] = EvaluateCandidate(job, *inst, *catalog_.FindGpu(inst->gpu), 1, a);
      ASSERT_TRUE(c[i].feasible) << c[i].reason;
    }
    if (!cpu) {
      ASSERT_GT(c[0].placement.fraction[kStateGrad][kNvme], 0.0);
    }
    EXPECT_GE(c[1].step.step_s, c[0].step.step_s) << cpu;
    EXPECT_EQ(c[1].step.optimizer_hidden_s, 0.0) << cpu;
    EXPECT_DOUBLE_EQ(c[1].step.optimizer_exposed_s, c[0].step.optimizer_exposed_s) << cpu;
    EXPECT_EQ(c[1].host_overhead_bytes - c[0].host_overhead_bytes,
              WorkerHostBufferBytes(job, 1, RankComputeOn(*inst, a)).optimizer_grad) << cpu;
    EXPECT_GT(c[1].host_overhead_bytes, c[0].host_overhead_bytes) << cpu;
  }
}

// On a CPU (the device simulated in host memory) auto runs the lane only
// where the ranks' compute threads leave it cores: then its AdamW runs on
// those beside the backward (hidden, or longer where they are few); where the
// compute takes every core (or its threads are unknown) auto plans as off.
TEST_F(ResourceModelTest, OnACpuAutoRunsTheLaneOnlyOnTheCoresTheComputeLeaves) {
  const InstanceSpec* inst = *catalog_.FindInstance("g6.2xlarge");
  ASSERT_EQ(inst->vcpus / inst->gpu_count, 8);
  JobSpec job = Job("tiny", 1, 8);  // its states fit the host whether or not the lane takes a buffer
  ModelAssumptions a;
  a.device_in_host_memory = true;
  auto eval = [&](OptimizerOverlap o, int threads) {
    job.train.optimizer_overlap = o;
    a.cpu_compute_threads = threads;
    Candidate c = EvaluateCandidate(job, *inst, *catalog_.FindGpu(inst->gpu), 1, a);
    EXPECT_TRUE(c.feasible) << c.reason;
    return c;
  };
  const Candidate off = eval(OptimizerOverlap::kOff, 8);
  for (const int threads : {8, 0}) {
    const Candidate taken = eval(OptimizerOverlap::kAuto, threads);
    EXPECT_EQ(LaneCores(RankComputeOn(*inst, a)), 0) << threads;
    EXPECT_EQ(taken.step.step_s, off.step.step_s) << threads;
    EXPECT_EQ(taken.step.optimizer_hidden_s, 0.0) << threads;
    EXPECT_EQ(taken.host_overhead_bytes, off.host_overhead_bytes) << threads;
  }
  const Candidate spare = eval(OptimizerOverlap::kAuto, 6);
  const RankCompute six = RankComputeOn(*inst, a);
  EXPECT_EQ(LaneCores(six), 2);
  const uint64_t buffer = WorkerHostBufferBytes(job, 1, six).optimizer_grad;
  const Candidate off6 = eval(OptimizerOverlap::kOff, 6);
  for (int s = 0; s < kNumStateClasses; ++s) {
    for (int t = 0; t < kNumTierIndices; ++t) {
      ASSERT_EQ(spare.placement.fraction[s][t], off6.placement.fraction[s][t]) << s << " " << t;
    }
  }
  EXPECT_NE(spare.step.optimizer_hidden_s, 0.0);
  EXPECT_NEAR(spare.step.step_s, off6.step.step_s - spare.step.optimizer_hidden_s, 1e-12);
  EXPECT_NEAR(spare.step.optimizer_hidden_s + spare.step.optimizer_exposed_s, off6.step.optimizer_s, 1e-12);
  EXPECT_GT(buffer, 0u);
  EXPECT_EQ(spare.host_overhead_bytes - off6.host_overhead_bytes, buffer);
}

TEST_F(ResourceModelTest, TheRowRecomputedByHandInTheDocs) {
  // docs/resource-model.md, "One row by hand": OPT-13B fp16 on one p5.4xlarge.
  JobSpec job = Job("opt-13b", 4, 64);
  job.dtype = DType::kFp16;
  job.train.tokens_per_epoch = 500000000;
  Candidate c = Eval(job, "p5.4xlarge", 1);
  ASSERT_TRUE(c.feasible) << c.reason;
  EXPECT_EQ(c.states.total(), 231362519040ull);  // 18 bytes a parameter: fp32 gradients
  EXPECT_EQ(c.gpu_fixed.activations, 6650068992ull);
  EXPECT_EQ(c.gpu_fixed.total(), 19974924288ull);
  EXPECT_EQ(c.capacity[kGpu], 65924421632ull);
  EXPECT_EQ(c.placement.bytes[kGpu], 25706946560ull);  // the parameters alone
  EXPECT_EQ(c.placement.bytes[kCpu], 205655572480ull);
  EXPECT_EQ(c.placement.fraction[kStateGrad][kGpu], 0.0);
  EXPECT_EQ(c.placement.fraction[kStateAdamM][kGpu], 0.0);
  EXPECT_EQ(c.step.accum_steps, 16);
  EXPECT_NEAR(c.step.micro_step_s, 2.28564, 1e-5);
  EXPECT_NEAR(c.step.optimizer_s, 8.0334, 1e-4);
  EXPECT_NEAR(c.step.step_s, 44.6036, 1e-4);
  EXPECT_NEAR(c.tokens_per_s, 2938.6, 0.1);
  EXPECT_NEAR(c.epoch_hours, 47.26, 0.01);
  EXPECT_NEAR(c.cost_per_epoch_usd, 325.17, 0.01);
}

TEST_F(ResourceModelTest, MoreNodesSpeedUpAndCollectivesCrossTheNetwork) {
  JobSpec job = Job("llama-2-13b", 1, 64);
  Candidate one = Eval(job, "p4d.24xlarge", 1), four = Eval(job, "p4d.24xlarge", 4);
  ASSERT_TRUE(one.feasible && four.feasible);
  EXPECT_LT(four.step.step_s, one.step.step_s);
  EXPECT_GT(four.step.collective_s / four.step.accum_steps, one.step.collective_s / one.step.accum_steps);
}

// The tencache policy needs three host slots of every shard size (scheduler/plan.h
// LeastHostBudget): a smaller host budget is infeasible, named.
TEST_F(ResourceModelTest, AHostBudgetBelowTheCachesLeastIsInfeasible) {
  JobSpec job = Job("gpt2", 1, 8);
  const uint64_t least = LeastHostBudget(job.model, job.dtype, 1);
  job.cache.host_budget = least;
  EXPECT_TRUE(Eval(job, "g5.xlarge", 1).feasible) << Eval(job, "g5.xlarge", 1).reason;
  job.cache.host_budget = least - 4096;
  const Candidate c = Eval(job, "g5.xlarge", 1);
  EXPECT_FALSE(c.feasible);
  EXPECT_NE(c.reason.find("cache.host_budget"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("is below the " + FormatBytes(least) + " the worker's cache needs"), std::string::npos)
      << c.reason;
  job.cache.policy = CachePolicy::kZeroInfinity;  // its own rule; not this one
  EXPECT_TRUE(Eval(job, "g5.xlarge", 1).feasible);
}

// The worker's own host buffers (common/shard_bytes.h) come out of the host
// memory that states may use: GPT-2 on one GPU stages its largest block's fp32
// gradient (the tied embedding and positions, 50,257 + 1,024 rows of 768), and
// bf16 splits the embedding's update, where clipping stores a gradient instead.
TEST_F(ResourceModelTest, HostCapacityLeavesTheWorkersOwnBuffers) {
  JobSpec split = Job("gpt2", 8, 8), clip = split;
  clip.train.grad_clip = 1.0;
  const uint64_t block0 = (50257ull + 1024) * 768;
  const RankCompute gpu{true, 0, 4}, cpu{false, 4, 4};
  const WorkerHostBuffers s = WorkerHostBufferBytes(split, 1, gpu), k = WorkerHostBufferBytes(clip, 1, gpu);
  EXPECT_EQ(s.grad_staging, block0 * 4);
  EXPECT_EQ(s.scatter, 0u);
  EXPECT_EQ(s.deferred_grad, 0u);
  EXPECT_EQ(s.embed_grad, block0 * 4);
  // Positions (1,024 rows) and 8 x 1,024 looked-up rows, eight fp32 arrays.
  EXPECT_EQ(s.held_rows, (1024ull + 8 * 1024) * 768 * 8 * 4);
  EXPECT_EQ(k.deferred_grad, (block0 + 1) * 4);
  EXPECT_EQ(k.embed_grad + k.held_rows, 0u);
  EXPECT_EQ(WorkerHostBufferBytes(split, 1, cpu).grad_staging, 0u);  // a CPU computes from host memory
  EXPECT_EQ(WorkerHostBufferBytes(split, 4, gpu).scatter, ((block0 + 3) / 4 + 1) * 4);
  const Candidate cs = Eval(split, "g5.xlarge", 1), ck = Eval(clip, "g5.xlarge", 1);
  ASSERT_TRUE(cs.feasible && ck.feasible) << cs.reason << ck.reason;
  EXPECT_EQ(cs.capacity[kCpu] + s.total(), ck.capacity[kCpu] + k.total());
  EXPECT_LT(cs.capacity[kCpu], ck.capacity[kCpu]);
}

// Between nodes every ring step waits for the network: the catalog's latency,
// or an assumed one that the candidate names.
TEST_F(ResourceModelTest, NetworkLatencyCostsEveryRingStepBetweenNodes) {
  JobSpec job = Job("llama-2-13b", 1, 64);
  InstanceSpec inst = **catalog_.FindInstance("p4d.24xlarge");
  const GpuSpec& gpu = *catalog_.FindGpu(inst.gpu);
  inst.network_latency_us.reset();
  const Candidate assumed = EvaluateCandidate(job, inst, gpu, 2, ModelAssumptions());
  auto says = [](const Candidate& c) {
    for (const std::string& a : c.assumptions) {
      if (a.find("network latency assumed: 25 us") != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(says(assumed));
  EXPECT_FALSE(says(EvaluateCandidate(job, inst, gpu, 1, ModelAssumptions())));  // one node: no network
  inst.network_latency_us = 1000;
  const Candidate slow = EvaluateCandidate(job, inst, gpu, 2, ModelAssumptions());
  EXPECT_FALSE(says(slow));
  // Per micro-step: every block's forward gather, backward gather and
  // reduce-scatter take ranks - 1 ring steps each (16 ranks).
  const double per_micro = (slow.step.collective_s - assumed.step.collective_s);
  const int blocks = job.model.num_blocks();
  const int collectives = 3 * (blocks - 1) + 2 * (job.model.tied_embeddings ? 1 : 0) + 2;
  EXPECT_NEAR(per_micro, collectives * 15 * (1000 - 25) * 1e-6, 1e-9 + 0.02 * per_micro);
}

ModelShape BigVocab() { return BigVocabShape(); }  // tests/common/big_vocab_shape.h

TEST_F(ResourceModelTest, AnEmbeddingOfMoreThanTwoToThe32ParametersIsPlannedInExactBytes) {
  const ModelShape m = BigVocab();
  const ShardBytes s = ShardBytesPerRank(m, DType::kBf16, 8);
  EXPECT_EQ(s.bytes[kStateParam], 2659209216ull);
  EXPECT_EQ(s.bytes[kStateMaster], 5318418432ull);
  EXPECT_EQ(s.total(), 23932882944ull);  // 18 bytes for each of 1329604608 elements
  // The last block gathers the final norm and the tied head, 4194320384 bf16
  // parameters: two gathered blocks and one block's gradient of it, and
  // autograd's gradient of the embedding (4194304000 parameters).
  const GpuFixedBytes f = GpuFixedPerRank(m, DType::kBf16, 1, 8, 80.0 * double(kGiB), ModelAssumptions());
  EXPECT_EQ(f.working_set, 3 * 8388640768ull + 8388608000ull);
  EXPECT_EQ(f.staging, 2 * 1048580096ull);
  // Three slots of each shard size (the embedding's pieces, 699050668 and
  // 699050664 bytes, share one 4 KiB-rounded size) outweigh every gradient
  // shard and two staging buffers.
  EXPECT_EQ(LeastHostBudget(m, DType::kBf16, 8), 9588277248ull);
  EXPECT_EQ(LeastHostBudget(m, DType::kFp32, 1), 80598335488ull);
}

}  // namespace
}  // namespace tencache
