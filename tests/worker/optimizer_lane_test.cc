// The optimizer lane (train.optimizer_overlap, docs/worker.md "The optimizer
// lane"): updates on the lane give the training thread's results bit for bit —
// fp32, bf16 and fp16; gradient clipping firing and not; fp16 overflow; one and
// two ranks; accumulated and one-piece gradients — and the step's events (the
// cache's acquire order the plan is built from) are the same.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/shard_bytes.h"
#include "launcher/resource_model.h"
#include "trainer_fixture.h"
#include "worker/access_recorder.h"
#include "worker/optimizer_lane.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

struct LaneRun {
  std::vector<StepMetrics> steps;
  std::vector<StepEvent> events;  // the profiled step's
  std::string describe;
};

// `steps` steps of a cached (NVMe-backed) small job with `sets`, the lane on or off.
// `refuse` >= 0: the lane is refused that acquire of every update (Trainer::TEST_RefuseLaneAcquire).
LaneRun Train1(const std::string& tag, std::vector<std::string> sets, bool overlap, int steps,
               const std::string& host_budget = "1536KiB", int refuse = -1) {
  // The caller's sets come last: they may set the device budget.
  sets.insert(sets.begin(), {std::string("train.optimizer_overlap=") + (overlap ? "on" : "off"),
                             "cache.device_budget=320KiB", "cache.host_budget=" + host_budget});
  const std::string t = tag + (overlap ? "-on" : "-off");
  auto solo = MakeSoloCommunicator();
  LaneRun r;
  StatusOr<std::unique_ptr<Trainer>> trainer =
      Trainer::Create(SmallJob("tencache", t, sets), solo.get(), Corpus(), [](const std::string&) {});
  EXPECT_TRUE(trainer.ok()) << trainer.status().ToString();
  if (!trainer.ok()) return r;
  r.describe = (*trainer)->Describe();
  (*trainer)->TEST_RefuseLaneAcquire(refuse);
  for (int s = 0; s < steps; ++s) {
    StatusOr<StepMetrics> m = (*trainer)->Step();
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (!m.ok()) break;
    r.steps.push_back(*m);
  }
  r.events = (*trainer)->profiled_events();
  trainer->reset();
  fs::remove_all(NvmeDir(t));
  return r;
}

void ExpectSameRun(const LaneRun& on, const LaneRun& off, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(on.steps.size(), off.steps.size());
  for (size_t s = 0; s < on.steps.size(); ++s) {
    EXPECT_EQ(on.steps[s].loss, off.steps[s].loss) << "step " << s;  // bitwise
    const double a = on.steps[s].grad_norm, b = off.steps[s].grad_norm;
    EXPECT_TRUE(a == b || (std::isnan(a) && std::isnan(b))) << "step " << s << ": " << a << " against " << b;
    EXPECT_EQ(on.steps[s].skipped, off.steps[s].skipped) << "step " << s;
    EXPECT_EQ(on.steps[s].loss_scale, off.steps[s].loss_scale) << "step " << s;
    if (s > 0) {
      EXPECT_EQ(on.steps[s].allocations_after_warmup, 0) << "step " << s;
    }
    if (!on.steps[s].skipped) {
      EXPECT_GT(on.steps[s].lanes[StepLane::kOptimizer], 0) << "step " << s;  // the lane's busy time is counted
    }
  }
  EXPECT_TRUE(on.events == off.events) << "the step's events differ";
  EXPECT_NE(on.describe.find("on the optimizer lane"), std::string::npos) << on.describe;
  EXPECT_NE(off.describe.find("on the training thread"), std::string::npos) << off.describe;
}

struct Case {
  const char* name;
  std::vector<std::string> sets;
};

// Every dtype with clipping off, firing (a norm of 0.05: every step) and not
// firing (100), with gradients accumulated over 4 micro-batches and in one
// piece (1 micro-batch: the tied embedding's update split around the lookup).
TEST(OptimizerLane, UpdatesOnTheLaneEqualTheTrainingThreadsBitwise) {
  const int kSteps = 6;
  for (const char* dtype : {"fp32", "bf16", "fp16"}) {
    for (const Case& clip : {Case{"no clip", {}}, Case{"clip fires", {"train.grad_clip=0.05"}},
                             Case{"clip idle", {"train.grad_clip=100"}}}) {
      for (const Case& batch : {Case{"accumulated", {}}, Case{"one micro-batch", {"train.global_batch=2"}}}) {
        std::vector<std::string> sets = clip.sets;
        sets.insert(sets.end(), batch.sets.begin(), batch.sets.end());
        sets.push_back(std::string("model.dtype=") + dtype);
        const std::string what = std::string(dtype) + ", " + clip.name + ", " + batch.name;
        const LaneRun off = Train1("lane", sets, false, kSteps);
        const LaneRun on = Train1("lane", sets, true, kSteps);
        ExpectSameRun(on, off, what);
        if (std::string(clip.name) == "clip fires") {
          ASSERT_FALSE(on.steps.empty());
          EXPECT_GT(on.steps[0].grad_norm, 0.05) << what;  // it really clipped
        }
      }
    }
  }
}

// fp16 whose first scales overflow: those steps are skipped (no update
// issued) alike, then the updates apply on the lane.
TEST(OptimizerLane, Fp16OverflowSkipsAlike) {
  const std::vector<std::string> sets = {"model.dtype=fp16", "train.initial_loss_scale=1e39"};
  const LaneRun off = Train1("lane-over", sets, false, 30);
  const LaneRun on = Train1("lane-over", sets, true, 30);
  ASSERT_EQ(on.steps.size(), 30u);
  EXPECT_TRUE(on.steps[0].skipped);
  EXPECT_FALSE(on.steps.back().skipped);  // the scale came down to one that does not overflow
  ExpectSameRun(on, off, "fp16 overflowing");
}

// A host budget of three slots of a layer's size (1 MiB here): the lane's
// update may pin all three while the training thread needs one for the next
// block's parameter (whether it does depends on timing); the training thread
// then waits for the update and takes the slot (lane_fallbacks), with no
// allocation and the same results.
TEST(OptimizerLane, AtTheLeastHostBudgetTheTrainingThreadWaitsForTheLanesPins) {
  const std::vector<std::string> sets = {"train.global_batch=2"};
  const LaneRun off = Train1("lane-tight", sets, false, 6, "1024KiB");
  const LaneRun on = Train1("lane-tight", sets, true, 6, "1024KiB");
  ExpectSameRun(on, off, "1 MiB host");
  int fallbacks = 0;
  for (const StepMetrics& m : on.steps) fallbacks += m.lane_fallbacks;
  for (const StepMetrics& m : off.steps) EXPECT_EQ(m.lane_fallbacks, 0);
  std::printf("acquires that waited for the lane's pins over 6 steps: %d\n", fallbacks);
}

// The other way round: the training thread took the last slot of a size
// first (the next block's stored gradient, read while the lane updates) and
// the cache refuses the lane's acquire. The lane stops there and the training
// thread finishes the update at its retire. Refusing each acquire of an update
// in turn — fp32: the parameter, the moments; mixed precision: the master, the
// moments, the 16-bit parameter after the piece's AdamW; and a later piece of
// an embedding in pieces — gives the training thread's bits and events.
TEST(OptimizerLane, AnUpdateRefusedASlotIsFinishedByTheTrainingThreadBitwise) {
  const int kSteps = 3;
  struct Refusal {
    const char* what;
    std::vector<std::string> sets;
    std::vector<int> refuse;  // acquires to refuse, one run each
    bool pieces;
  };
  const std::vector<Refusal> cases = {
      {"fp32, updates in the backward", {"train.global_batch=2"}, {0, 1, 2}, false},
      {"bf16, deferred updates", {"model.dtype=bf16", "train.grad_clip=100"}, {0, 1, 2, 3}, false},
      {"fp32, embedding in pieces", {"train.global_batch=2", "model.vocab=4096", "cache.device_budget=2MiB"}, {5}, true},
      {"bf16, embedding in pieces",
       {"model.dtype=bf16", "train.grad_clip=100", "model.vocab=4096", "cache.device_budget=2MiB"},
       {3, 5},
       true},
  };
  for (const Refusal& c : cases) {
    std::string host = "1536KiB";
    if (c.pieces) {
      const JobSpec probe = SmallJob("tencache", "lane-refused-probe", c.sets);
      host = std::to_string(LeastHostBudget(probe.model, probe.dtype, 1));
    }
    const LaneRun off = Train1("lane-refused", c.sets, false, kSteps, host);
    for (const int k : c.refuse) {
      const std::string what = std::string(c.what) + ", acquire " + std::to_string(k) + " refused";
      const LaneRun on = Train1("lane-refused", c.sets, true, kSteps, host, k);
      ExpectSameRun(on, off, what);
      for (size_t s = 0; s < on.steps.size(); ++s) EXPECT_GT(on.steps[s].lane_yields, 0) << what << ", step " << s;
    }
  }
}

// The recorder's side of it: an acquire refused with ResourceExhausted asks
// the pin release once and, when it released something, acquires again; the
// step's events hold the acquire once.
class RefusingStore : public ShardStore {
 public:
  explicit RefusingStore(int refusals) : inner_(MakeMemoryShardStore(MakeShardLayout({64}, 0, DType::kFp32, 1))),
                                         refusals_(refusals) {}
  std::string Describe() const override { return "refusing"; }
  const ShardLayout& layout() const override { return inner_->layout(); }
  StatusOr<ShardRef> Acquire(int block, ShardKind kind, int piece, Tier tier, AccessMode mode) override {
    ++acquires;
    if (refusals_ > 0) {
      --refusals_;
      return Status::ResourceExhausted("all slots pinned");
    }
    return inner_->Acquire(block, kind, piece, tier, mode);
  }
  PrefetchHandle Prefetch(int, ShardKind, int, Tier) override { return {}; }
  void Invalidate(int, ShardKind, int) override {}
  CacheMetrics EndStep() override { return {}; }
  TensorCache* cache() override { return nullptr; }
  int acquires = 0;

 private:
  std::unique_ptr<ShardStore> inner_;
  int refusals_;
};

TEST(OptimizerLane, ARefusedAcquireReleasesTheLanesPinsAndTriesOnce) {
  Profiler profiler{TraceHeader(), [](const std::string&) {}};
  for (const bool released : {true, false}) {
    RefusingStore store(released ? 1 : 2);
    AccessRecorder recorder(&store, &store.layout(), &profiler, ComputeDevice());
    recorder.BeginStep();
    int asked = 0;
    recorder.set_pin_release([&]() -> StatusOr<bool> {
      ++asked;
      return released;
    });
    StatusOr<ShardRef> ref = recorder.Acquire(0, ShardKind::kAdamM, 0, Tier::kHost, AccessMode::kWrite);
    EXPECT_EQ(ref.ok(), released) << ref.status().ToString();
    EXPECT_EQ(asked, 1);
    EXPECT_EQ(store.acquires, released ? 2 : 1);
    ASSERT_EQ(recorder.events().size(), 1u);  // recorded once
    EXPECT_EQ(recorder.events()[0].kind, StepEventKind::kAcquire);
  }
}

// Two ranks (threads): each rank's lane updates its shards; the losses equal
// the two ranks' without the lane, bit for bit.
TEST(OptimizerLane, TwoRanksEqualTheTrainingThreadsBitwise) {
  for (const Case& c : {Case{"fp32", {}}, Case{"bf16, clip fires", {"model.dtype=bf16", "train.grad_clip=0.05"}},
                        Case{"fp16", {"model.dtype=fp16"}}}) {
    auto two = [&](bool overlap) {
      std::vector<std::string> sets = c.sets;
      sets.push_back(std::string("train.optimizer_overlap=") + (overlap ? "on" : "off"));
      sets.push_back("cache.device_budget=160KiB");
      sets.push_back("cache.host_budget=1MiB");
      const std::string tag = std::string("lane2-") + (overlap ? "on" : "off");
      std::vector<StepMetrics> m = TrainOnRanks(SmallJob("tencache", tag, sets), 2, 6);
      fs::remove_all(NvmeDir(tag));
      return m;
    };
    const std::vector<StepMetrics> off = two(false), on = two(true);
    ASSERT_EQ(on.size(), 6u) << c.name;
    ASSERT_EQ(off.size(), 6u) << c.name;
    for (size_t s = 0; s < on.size(); ++s) {
      EXPECT_EQ(on[s].loss, off[s].loss) << c.name << ", step " << s;
      EXPECT_EQ(on[s].grad_norm, off[s].grad_norm) << c.name << ", step " << s;
    }
  }
}

// The lane's gradient buffer is what the planner counts (common/shard_bytes.h),
// and none is held with the lane off.
TEST(OptimizerLane, ItsGradientBufferIsWhatThePlannerCounts) {
  for (bool overlap : {true, false}) {
    const JobSpec job =
        SmallJob("tencache", "lane-buf", {std::string("train.optimizer_overlap=") + (overlap ? "on" : "off")});
    auto solo = MakeSoloCommunicator();
    StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(job, solo.get(), Corpus(), [](const std::string&) {});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    const WorkerHostBuffers want = WorkerHostBufferBytes(job, 1, (*t)->rank_compute());
    EXPECT_EQ((*t)->HostBuffers().optimizer_grad, want.optimizer_grad);
    EXPECT_EQ(want.optimizer_grad > 0, overlap);
    t->reset();
    fs::remove_all(NvmeDir("lane-buf"));
  }
}

// train.optimizer_overlap auto: the lane where the rank's compute threads
// leave it a core, the training thread where they take them all (there the
// lane's AdamW would only take cores from the compute: docs/benchmarks.md).
TEST(OptimizerLane, AutoRunsTheLaneOnlyWhereTheComputeLeavesACore) {
  const int cores = std::max(1, int(std::thread::hardware_concurrency()));
  struct RestoreThreads {
    int n = torch::get_num_threads();
    ~RestoreThreads() { torch::set_num_threads(n); }
  } restore;
  for (const int threads : {cores, 1}) {
    if (threads == 1 && cores == 1) continue;  // no core to leave
    SCOPED_TRACE(std::to_string(threads) + " compute thread(s) of " + std::to_string(cores) + " cores");
    torch::set_num_threads(threads);
    const JobSpec job = SmallJob("tencache", "lane-auto", {});
    ASSERT_EQ(job.train.optimizer_overlap, OptimizerOverlap::kAuto);
    auto solo = MakeSoloCommunicator();
    StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(job, solo.get(), Corpus(), [](const std::string&) {});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    const RankCompute& r = (*t)->rank_compute();
    EXPECT_FALSE(r.gpu);
    EXPECT_EQ(r.compute_threads, threads);
    EXPECT_EQ(r.rank_cores, cores);
    const bool lane = threads < cores;
    EXPECT_EQ((*t)->HostBuffers().optimizer_grad > 0, lane);
    const std::string describe = (*t)->Describe();
    EXPECT_EQ(describe.find("on the optimizer lane (AdamW on " + std::to_string(cores - threads) + " thread(s))") !=
                  std::string::npos, lane) << describe;
    EXPECT_EQ(describe.find("on the training thread (optimizer_overlap auto") != std::string::npos, !lane) << describe;
    StatusOr<StepMetrics> m = (*t)->Step();
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    t->reset();
    fs::remove_all(NvmeDir("lane-auto"));
  }
  // The rank's share as the worker counts it (ranks on its machine, not in
  // the run): one core, which its one compute thread takes.
  torch::set_num_threads(1);
  ComputeDevice one_core;
  one_core.cores = 1;
  auto solo = MakeSoloCommunicator();
  StatusOr<std::unique_ptr<Trainer>> t =
      Trainer::Create(SmallJob("tencache", "lane-auto", {}), solo.get(), Corpus(), [](const std::string&) {}, one_core);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)->rank_compute().rank_cores, 1);
  EXPECT_EQ((*t)->HostBuffers().optimizer_grad, 0u);
  t->reset();
  fs::remove_all(NvmeDir("lane-auto"));
}

// The lane itself: an issued update runs on another thread while the caller
// goes on; Retire returns its status and figures; the destructor waits for
// one in flight.
TEST(OptimizerLane, RunsTheIssuedUpdateAndRetiresItsStatus) {
  std::thread::id ran_on;
  int runs = 0;
  auto lane = std::make_unique<OptimizerLane>(4, [&](int block, const float* grad, LaneUpdate* done) {
    ran_on = std::this_thread::get_id();
    ++runs;
    done->compute_s = grad[0];
    return block == 2 ? Status::Internal("block 2 failed") : Status::Ok();
  });
  EXPECT_EQ(lane->grad_floats(), 4u);
  EXPECT_FALSE(lane->in_flight());
  lane->grad_buffer()[0] = 0.5f;
  lane->Issue(1);
  EXPECT_TRUE(lane->in_flight());
  LaneUpdate done;
  EXPECT_TRUE(lane->Retire(&done).ok());
  EXPECT_FALSE(lane->in_flight());
  EXPECT_EQ(done.block, 1);
  EXPECT_EQ(done.compute_s, 0.5);
  EXPECT_NE(ran_on, std::this_thread::get_id());
  lane->Issue(2);
  EXPECT_EQ(lane->Retire(&done).message(), "block 2 failed");
  lane->Issue(3);  // in flight at destruction: waited for
  lane.reset();
  EXPECT_EQ(runs, 3);
}

}  // namespace
}  // namespace tencache
