#include "scheduler/sim_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "common/model_shape.h"
#include "scheduler/policies.h"
#include "scheduler/synth.h"

namespace tencache {
namespace {

// Prefetches the next access's tensor and drops each tensor after use.
class PrefetchNextPolicy : public SimPolicy {
 public:
  const char* name() const override { return "prefetch-next"; }
  void MakeRoom(TensorId id, DeviceAccessIndex g, SimContext& s) override {}
  void AfterAccess(DeviceAccessIndex g, SimContext& s) override {
    s.Evict(s.seq().tensor(g));
    s.Fetch(s.seq().tensor(g + 1));
  }
};

CacheSimulator MakeSim(const Trace& trace, uint64_t device, bool shared = true) {
  SimConfig c;
  c.budgets.device = device;
  c.budgets.host = 64 * trace.TotalTensorBytes();
  c.links.collectives_share_pcie = shared;
  c.steps = 1;
  StatusOr<CacheSimulator> sim = CacheSimulator::Create(trace, c);
  EXPECT_TRUE(sim.ok()) << sim.status().ToString();
  return std::move(sim).value();
}

TEST(SimEngineTest, PrefetchedTensorsAreMissesEvenWhenOnTime) {
  SynthOptions o;
  o.micro_batch = 64;  // plenty of compute to hide each copy
  const Trace trace = *SynthesizeTrace(*FindPreset("tiny"), o);
  CacheSimulator sim = MakeSim(trace, trace.TotalTensorBytes());
  PrefetchNextPolicy p;
  PolicyResult r = sim.Run(p);
  EXPECT_EQ(r.device_hit_rate, 0.0);
  EXPECT_DOUBLE_EQ(r.host_hit_rate, 1.0);
  EXPECT_GT(r.bytes[Link::kH2D], 0u);
}

TEST(SimEngineTest, SteadyStateExcludesColdMisses) {
  const Trace trace = *SynthesizeTrace(*FindPreset("tiny"), SynthOptions{});
  CacheSimulator sim = MakeSim(trace, 4 * trace.TotalTensorBytes());
  auto belady = MakePolicy("belady");
  PolicyResult r = sim.Run(**belady);
  EXPECT_DOUBLE_EQ(r.device_hit_rate, 1.0);
  EXPECT_EQ(r.stall_s, 0.0);
  // Everything resident: only the optimizer's in-place updates go host->device,
  // and every gradient comes back.
  EXPECT_EQ(r.bytes[Link::kH2D], trace.TotalTensorBytes());
  EXPECT_GE(r.bytes[Link::kD2H], trace.TotalTensorBytes());
  EXPECT_GT(r.step_time_s, 0.0);
}

// Every backward access sends its gradient to the host as the worker does:
// the fp32 shard (twice a 16-bit parameter's bytes), in every dtype.
TEST(SimEngineTest, EachGradientLeavesTheDeviceAsItsFp32Shard) {
  for (DType dtype : {DType::kBf16, DType::kFp16, DType::kFp32}) {
    SynthOptions o;
    o.dtype = dtype;
    const Trace trace = *SynthesizeTrace(*FindPreset("tiny"), o);
    ASSERT_EQ(trace.header.ranks, 1);  // no collective shares the lane
    uint64_t grads = 0;
    for (const TraceEvent& e : trace.events) {
      if (e.kind == EventKind::kAccess && e.phase == Phase::kBackward) grads += e.bytes / DTypeBytes(dtype) * sizeof(float);
    }
    CacheSimulator sim = MakeSim(trace, 4 * trace.TotalTensorBytes());
    auto belady = MakePolicy("belady");
    const PolicyResult r = sim.Run(**belady);
    EXPECT_EQ(r.bytes[Link::kD2H], grads) << DTypeName(dtype);
  }
}

TEST(SimEngineTest, TencachePrefetchNeverDelaysAnAllGather) {
  SynthOptions o;
  o.ranks = 4;
  o.micro_batch = 4;
  for (const char* preset : {"gpt2", "opt-1.3b"}) {
    const Trace trace = *SynthesizeTrace(*FindPreset(preset), o);
    for (int pct : {20, 50, 80}) {
      SCOPED_TRACE(std::string(preset) + " " + std::to_string(pct) + "%");
      CacheSimulator sim = MakeSim(trace, trace.TotalTensorBytes() * pct / 100);
      auto ours = MakePolicy("tencache");
      EXPECT_EQ(sim.Run(**ours).collective_delay_s, 0.0);
    }
  }
  // The property is not free: a policy that ignores the collective lane does delay them.
  const Trace trace = *SynthesizeTrace(*FindPreset("opt-1.3b"), o);
  CacheSimulator sim = MakeSim(trace, trace.TotalTensorBytes() / 2);
  auto window = MakePolicy("10cache-window");
  EXPECT_GT(sim.Run(**window).collective_delay_s, 0.0);
  CacheSimulator separate = MakeSim(trace, trace.TotalTensorBytes() / 2, /*shared=*/false);
  EXPECT_EQ(separate.Run(**MakePolicy("10cache-window")).collective_delay_s, 0.0);
}

// The training thread's own time before each access (the trace's lead_s, the
// worker's bookkeeping and glue) lengthens the step as much when nothing else
// bounds it, and no lane counts it.
TEST(SimEngineTest, EachAccesssLeadAddsToTheStep) {
  const Trace trace = *SynthesizeTrace(*FindPreset("tiny"), SynthOptions{});
  Trace led = trace;
  double leads = 0;
  for (TraceEvent& e : led.events) {
    if (e.kind != EventKind::kAccess) continue;
    e.lead_s = 1e-3;
    leads += e.lead_s;
  }
  auto belady = MakePolicy("belady");
  const PolicyResult plain = MakeSim(trace, 4 * trace.TotalTensorBytes()).Run(**belady);
  const PolicyResult with_leads = MakeSim(led, 4 * trace.TotalTensorBytes()).Run(**belady);
  EXPECT_EQ(with_leads.stall_s, 0.0);
  // One for one, less at most the gradient copies the leads hid.
  EXPECT_LE(with_leads.step_time_s - plain.step_time_s, leads + 1e-9);
  EXPECT_GE(with_leads.step_time_s - plain.step_time_s, 0.99 * leads);
  for (int l = 0; l < kStepLanes; ++l) EXPECT_DOUBLE_EQ(with_leads.lanes.seconds[l], plain.lanes.seconds[l]) << l;
}

// The worker's training thread runs each update itself, right after the
// tensor's last backward use: nothing overlaps an update but transfers, so with
// everything resident the step is at least the compute plus the updates.
TEST(SimEngineTest, TheTrainingThreadRunsEachUpdate) {
  // Compute far longer than its copies, and updates half as long as the
  // compute, which could hide them were they run beside it.
  SynthOptions o;
  o.device_flops /= 1e4;
  double compute = 0, updates = 0;
  const Trace plain = *SynthesizeTrace(*FindPreset("tiny"), o);
  for (const TraceEvent& e : plain.events) {
    if (e.kind != EventKind::kAccess) continue;
    (e.phase == Phase::kOptimizer ? updates : compute) += e.duration_s();
  }
  o.host_adam_params_per_s *= 2 * updates / compute;
  const Trace synth = *SynthesizeTrace(*FindPreset("tiny"), o);
  std::map<TensorId, TraceEvent> update;
  std::map<TensorId, size_t> last_backward;
  for (size_t i = 0; i < synth.events.size(); ++i) {
    const TraceEvent& e = synth.events[i];
    if (e.kind != EventKind::kAccess) continue;
    if (e.phase == Phase::kOptimizer) update[e.id] = e;
    if (e.phase == Phase::kBackward) last_backward[e.id] = i;
  }
  Trace trace = synth;  // as the worker's: each update inside the backward
  trace.events.clear();
  for (size_t i = 0; i < synth.events.size(); ++i) {
    const TraceEvent& e = synth.events[i];
    if (e.kind == EventKind::kAccess && e.phase == Phase::kOptimizer) continue;
    trace.events.push_back(e);
    if (e.kind == EventKind::kAccess && e.phase == Phase::kBackward && last_backward[e.id] == i) {
      trace.events.push_back(update.at(e.id));
    }
  }
  ASSERT_EQ(trace.events.size(), synth.events.size());
  compute = updates = 0;
  for (const TraceEvent& e : trace.events) {
    if (e.kind != EventKind::kAccess) continue;
    (e.phase == Phase::kOptimizer ? updates : compute) += e.duration_s();
  }
  ASSERT_GT(updates, 0.4 * compute);
  auto belady = MakePolicy("belady");
  const PolicyResult r = MakeSim(trace, 4 * trace.TotalTensorBytes()).Run(**belady);
  EXPECT_EQ(r.stall_s, 0.0);
  EXPECT_NEAR(r.lanes[StepLane::kOptimizer], updates, 1e-9);
  EXPECT_GE(r.step_time_s, compute + updates - 1e-9);
}

// A transfer asked for before ones already placed takes the idle time from its
// request on, in as many stretches as it needs, ahead of the later ones.
TEST(LaneTest, AnEarlierRequestFillsTheIdleTimeBeforeLaterTransfers) {
  Lane lane;
  EXPECT_DOUBLE_EQ(lane.Reserve(10, 1), 11);  // [10, 11)
  EXPECT_DOUBLE_EQ(lane.Reserve(0, 3), 3);    // [0, 3), before it
  EXPECT_DOUBLE_EQ(lane.Reserve(1, 9), 13);   // [3, 10) and [11, 13)
  EXPECT_DOUBLE_EQ(lane.Reserve(0, 1), 14);   // no idle time left before 13
  EXPECT_DOUBLE_EQ(lane.free_at, 14);
  EXPECT_DOUBLE_EQ(lane.busy, 14);
  lane.Occupy(20, 21);  // a collective: from its start to its end
  EXPECT_DOUBLE_EQ(lane.Reserve(14, 2), 16);
  EXPECT_DOUBLE_EQ(lane.Reserve(16, 5), 22);  // [16, 20) and [21, 22)
  EXPECT_DOUBLE_EQ(lane.busy, 22);
  lane.Forget(30);  // idle time before 30 is no longer offered
  EXPECT_DOUBLE_EQ(lane.Reserve(0, 1), 31);
}

TEST(LaneTest, EndPredictsWhereReserveWillPlaceATransfer) {
  Lane lane;
  lane.Reserve(10, 1);  // [10, 11)
  lane.Reserve(0, 3);   // [0, 3)
  // The lane ends at 11, but a 2 s transfer asked for at 4 fits in the gap [4, 6).
  EXPECT_DOUBLE_EQ(lane.End(4, 2), 6);
  EXPECT_DOUBLE_EQ(lane.End(1, 9), 13);  // [3, 10) and [11, 13)
  const double busy = lane.busy, free_at = lane.free_at;
  EXPECT_DOUBLE_EQ(busy, 4);  // End reserved nothing
  EXPECT_DOUBLE_EQ(free_at, 11);
  for (const auto& [ready, seconds] : std::vector<std::pair<double, double>>{{4, 2}, {1, 9}, {0, 0.5}, {12, 1}}) {
    const double predicted = lane.End(ready, seconds);
    EXPECT_DOUBLE_EQ(lane.Reserve(ready, seconds), predicted) << ready << " " << seconds;
  }
}

TEST(SimEngineTest, RejectsTooFewSteps) {
  const Trace trace = *SynthesizeTrace(*FindPreset("tiny"), SynthOptions{});
  SimConfig c;
  c.budgets.device = trace.TotalTensorBytes();
  c.budgets.host = 64 * trace.TotalTensorBytes();
  c.steps = 0;
  EXPECT_EQ(CacheSimulator::Create(trace, c).status().code(), StatusCode::kInvalidArgument);
}

TEST(SimEngineTest, RejectsANegativeCopyLatency) {
  const Trace trace = *SynthesizeTrace(*FindPreset("tiny"), SynthOptions{});
  SimConfig c;
  c.budgets.device = trace.TotalTensorBytes();
  c.budgets.host = 64 * trace.TotalTensorBytes();
  c.copy_latency_s = -1e-6;
  EXPECT_EQ(CacheSimulator::Create(trace, c).status().code(), StatusCode::kInvalidArgument);
}

// Fetching on demand, every miss waits for its own copy on an idle lane: the
// fixed latency adds exactly once per miss to the stall.
TEST(SimEngineTest, CopyLatencyAddsOncePerDemandFetch) {
  SynthOptions o;
  o.micro_batch = 8;
  const Trace trace = *SynthesizeTrace(*FindPreset("gpt2"), o);
  PolicyResult r[2];
  for (int i = 0; i < 2; ++i) {
    SimConfig c;
    c.budgets.device = trace.TotalTensorBytes() / 4;
    c.budgets.host = 64 * trace.TotalTensorBytes();
    c.steps = 1;
    c.copy_latency_s = i == 0 ? 0 : 500e-6;
    StatusOr<CacheSimulator> sim = CacheSimulator::Create(trace, c);
    ASSERT_TRUE(sim.ok()) << sim.status().ToString();
    r[i] = sim->Run(**MakePolicy("belady"));
  }
  ASSERT_EQ(r[0].device_hit_rate, r[1].device_hit_rate);
  const double misses = (1 - r[0].device_hit_rate) * double(r[0].accesses);
  EXPECT_GT(misses, 0);
  EXPECT_NEAR(r[1].stall_s - r[0].stall_s, misses * 500e-6, 1e-9 * misses);
  EXPECT_GE(r[1].step_time_s - r[0].step_time_s, misses * 500e-6 * (1 - 1e-9));
}

// The worker's order: each tensor's update right after its backward access.
Trace UpdatesInsideBackward(const Trace& synthesized) {
  Trace t = synthesized;
  std::vector<TraceEvent> updates, rest;
  for (const TraceEvent& e : t.events) {
    (e.kind == EventKind::kAccess && e.phase == Phase::kOptimizer ? updates : rest).push_back(e);
  }
  t.events.clear();
  for (const TraceEvent& e : rest) {
    t.events.push_back(e);
    if (e.kind != EventKind::kAccess || e.phase != Phase::kBackward) continue;
    for (const TraceEvent& u : updates)
      if (u.id == e.id) t.events.push_back(u);
  }
  return t;
}

class StatePrefetchingPolicy : public PrefetchNextPolicy {
 public:
  bool PrefetchesStates() const override { return true; }
};

// gpt2 in the worker's order (each update right after its backward) on a host
// that holds the gradients, the staging and every home, so that the states
// spill to NVMe; run with the states fetched on demand and ahead.
struct SpilledStates {
  Trace trace;
  SimConfig config;
  PolicyResult on_demand, ahead;
};
void RunSpilledStates(SpilledStates* job, const LinkSpeeds& links = LinkSpeeds()) {
  SynthOptions o;
  o.micro_batch = 8;
  job->trace = UpdatesInsideBackward(*SynthesizeTrace(*FindPreset("gpt2"), o));
  ASSERT_TRUE(ValidateTrace(job->trace, "reordered").ok());
  uint64_t largest = 0;
  for (uint64_t b : job->trace.TensorBytes()) largest = std::max(largest, b);
  job->config.budgets.device = job->trace.TotalTensorBytes();
  job->config.budgets.host = 2 * job->trace.TotalTensorBytes() + 2 * largest;
  job->config.steps = 2;
  job->config.links = links;
  StatusOr<CacheSimulator> sim = CacheSimulator::Create(job->trace, job->config);
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  PrefetchNextPolicy on_demand;
  StatePrefetchingPolicy ahead;
  job->on_demand = sim->Run(on_demand);
  job->ahead = sim->Run(ahead);
}

// States on NVMe: reading them from the start of the access the update follows
// (tencache's worker) hides them behind its compute; the bytes are the same.
TEST(SimEngineTest, StatePrefetchHidesNvmeStatesBehindTheBackward) {
  SpilledStates job;
  ASSERT_NO_FATAL_FAILURE(RunSpilledStates(&job));
  const PolicyResult &a = job.on_demand, &b = job.ahead;
  EXPECT_GT(a.bytes[Link::kNvmeRead], 0u);
  EXPECT_EQ(a.bytes[Link::kNvmeRead], b.bytes[Link::kNvmeRead]);
  EXPECT_EQ(a.bytes[Link::kNvmeWrite], b.bytes[Link::kNvmeWrite]);
  EXPECT_LT(b.step_time_s, a.step_time_s);
}

// The lanes: each link's busy time is its bytes over its speed (FIFO lanes
// never overlap), compute is the trace's device time, the optimizer its CPU
// time; the busiest lane bounds the step, and hiding the NVMe reads behind the
// backward brings the step closer to that bound.
TEST(SimEngineTest, LanesAreBytesOverSpeedAndTheBusiestBoundsTheStep) {
  SpilledStates job;
  ASSERT_NO_FATAL_FAILURE(RunSpilledStates(&job));
  const Trace& trace = job.trace;
  const SimConfig& c = job.config;
  const PolicyResult &a = job.on_demand, &b = job.ahead;
  double compute = 0, optimizer = 0;
  for (const TraceEvent& e : trace.events) {
    if (e.is_device_access()) compute += e.duration_s();
    else if (e.kind == EventKind::kAccess) optimizer += e.duration_s();
  }
  for (const PolicyResult* r : {&a, &b}) {
    EXPECT_NEAR(r->lanes[StepLane::kCompute], compute, 1e-9 * compute);
    EXPECT_NEAR(r->lanes[StepLane::kOptimizer], optimizer, 1e-9 * optimizer);
    EXPECT_NEAR(r->lanes[StepLane::kNvmeRead], double(r->bytes[Link::kNvmeRead]) / c.links.nvme_read_bps, 1e-6);
    EXPECT_NEAR(r->lanes[StepLane::kNvmeWrite], double(r->bytes[Link::kNvmeWrite]) / c.links.nvme_write_bps, 1e-6);
    EXPECT_NEAR(r->lanes[StepLane::kD2H], double(r->bytes[Link::kD2H]) / c.links.d2h_bps, 1e-6);
    for (int l = 0; l < kStepLanes; ++l) EXPECT_LE(r->lanes.seconds[l], r->step_time_s * (1 + 1e-9));
    EXPECT_DOUBLE_EQ(r->overlap_efficiency, r->lanes[r->lanes.Largest()] / r->step_time_s);
  }
  // The states spill to NVMe, read and written once a step each; writes are the slower link.
  EXPECT_EQ(a.lanes.Largest(), StepLane::kNvmeWrite);
  EXPECT_GT(b.overlap_efficiency, a.overlap_efficiency);
}

}  // namespace
}  // namespace tencache

namespace tencache {
namespace {

// Three one-rank tensors (block = id) of 4 KiB: forward 1 s each, backward
// 2 s each; each update (`update_s[id]` seconds) right after its tensor's
// backward, as the worker runs them, or with `deferred` all after the
// backward, each on the optimizer lane where `lane[id]`.
Trace ThreeBlocks(const std::vector<double>& update_s, const std::vector<bool>& lane, bool deferred = false) {
  Trace t;
  t.header.deferred_updates = deferred;
  double clock = 0;
  auto access = [&](TensorId id, Phase phase, double seconds) {
    TraceEvent e;
    e.id = id;
    e.name = "w" + std::to_string(id);
    e.phase = phase;
    e.block = int(id);
    e.bytes = 4096;
    e.start_s = clock;
    e.end_s = clock += seconds;
    e.optimizer_lane = phase == Phase::kOptimizer && lane[id];
    t.events.push_back(e);
  };
  for (TensorId id : {0u, 1u, 2u}) access(id, Phase::kForward, 1);
  for (TensorId id : {2u, 1u, 0u}) {
    access(id, Phase::kBackward, 2);
    if (!deferred) access(id, Phase::kOptimizer, update_s[id]);
  }
  if (deferred) {
    for (TensorId id : {2u, 1u, 0u}) access(id, Phase::kOptimizer, update_s[id]);
  }
  EXPECT_TRUE(ValidateTrace(t, "three blocks").ok());
  return t;
}

PolicyResult RunResident(const Trace& trace) {
  return MakeSim(trace, 4 * trace.TotalTensorBytes()).Run(**MakePolicy("belady"));
}

// An update on the optimizer lane shorter than the next access's compute is
// hidden behind it: the step is the training thread's alone, shorter by the
// update, and the training thread never waits for the lane. The lanes are
// busy as long as before.
TEST(SimEngineTest, ALaneUpdateShorterThanTheNextAccessIsHidden) {
  const std::vector<double> updates = {0.25, 0.5, 1.5};
  const PolicyResult thread = RunResident(ThreeBlocks(updates, {false, false, false}));
  const PolicyResult lane = RunResident(ThreeBlocks(updates, {false, true, true}));
  EXPECT_EQ(thread.optimizer_wait_s, 0.0);
  EXPECT_NEAR(lane.optimizer_wait_s, 0.0, 1e-6);
  EXPECT_NEAR(lane.step_time_s, thread.step_time_s - 0.5 - 1.5, 1e-6);
  EXPECT_GE(thread.step_time_s, 3 + 6 + 0.25 + 0.5 + 1.5);
  EXPECT_EQ(lane.stall_s, 0.0);
  for (int l = 0; l < kStepLanes; ++l) EXPECT_NEAR(lane.lanes.seconds[l], thread.lanes.seconds[l], 1e-9) << l;
  EXPECT_NEAR(lane.lanes[StepLane::kOptimizer], 2.25, 1e-9);
}

// One longer than the next access's compute: the training thread waits for
// it before that access ends, the difference, counted as its wait for the
// optimizer (in the step time, not in the stall).
TEST(SimEngineTest, ALaneUpdateLongerThanTheNextAccessMakesTheTrainingThreadWait) {
  const std::vector<double> updates = {0.25, 3, 3};
  const PolicyResult thread = RunResident(ThreeBlocks(updates, {false, false, false}));
  const PolicyResult lane = RunResident(ThreeBlocks(updates, {false, true, true}));
  EXPECT_NEAR(lane.optimizer_wait_s, 2 * (3 - 2), 1e-6);
  EXPECT_NEAR(lane.step_time_s, thread.step_time_s - 2 * 2, 1e-6);  // each hides one backward
  EXPECT_EQ(lane.stall_s, thread.stall_s);
  // The last update on the lane has no access after it: the step's end retires it.
  const PolicyResult last = RunResident(ThreeBlocks(updates, {true, true, true}));
  EXPECT_NEAR(last.optimizer_wait_s, 2 * (3 - 2) + 0.25, 1e-6);
  EXPECT_NEAR(last.step_time_s, lane.step_time_s, 1e-6);
}

// Deferred updates on the lane run back to back: each issue retires the one
// before, and the step's end the last, so with nothing to prepare (every
// stored gradient in host memory) the training thread waits out every update
// and the step is as long as on the training thread.
TEST(SimEngineTest, DeferredLaneUpdatesRunBackToBack) {
  const std::vector<double> updates = {0.25, 0.5, 1.5};
  const PolicyResult thread = RunResident(ThreeBlocks(updates, {false, false, false}, true));
  const PolicyResult lane = RunResident(ThreeBlocks(updates, {true, true, true}, true));
  EXPECT_NEAR(lane.optimizer_wait_s, 0.25 + 0.5 + 1.5, 1e-6);
  EXPECT_NEAR(lane.step_time_s, thread.step_time_s, 1e-6);
  EXPECT_GE(lane.step_time_s, 3 + 6 + 0.25 + 0.5 + 1.5);
  EXPECT_NEAR(lane.lanes[StepLane::kOptimizer], thread.lanes[StepLane::kOptimizer], 1e-9);
}

// With the states and stored gradients spilled to NVMe, each deferred update
// on the lane overlaps the training thread's reads of the next one's stored
// gradient: its waits for them leave the stall (the training thread waits
// for the lane instead) and the step is no longer, for the same bytes on
// every link (the host tier decides the same reads and writes; only the
// timeline that waits for them changes); the lane runs one update at a time.
TEST(SimEngineTest, DeferredLaneUpdatesOverlapTheNextStoredGradientsReads) {
  SynthOptions o;
  o.micro_batch = 8;
  Trace thread = *SynthesizeTrace(*FindPreset("gpt2"), o);  // every update after the backward
  thread.header.deferred_updates = true;
  Trace lane = thread;
  double updates = 0, compute = 0;
  for (TraceEvent& e : lane.events) {
    if (e.kind != EventKind::kAccess) continue;
    e.optimizer_lane = e.phase == Phase::kOptimizer;
    (e.optimizer_lane ? updates : compute) += e.duration_s();
  }
  SimConfig c;
  c.budgets.device = thread.TotalTensorBytes();
  c.budgets.host = 3 * thread.TotalTensorBytes();
  c.steps = 2;
  PolicyResult r[2];
  for (int i = 0; i < 2; ++i) {
    StatusOr<CacheSimulator> sim = CacheSimulator::Create(i == 0 ? thread : lane, c);
    ASSERT_TRUE(sim.ok()) << sim.status().ToString();
    StatePrefetchingPolicy policy;
    r[i] = sim->Run(policy);
  }
  EXPECT_GT(r[0].bytes[Link::kNvmeRead], 0u);
  for (Link l : kLinks) EXPECT_EQ(r[1].bytes[l], r[0].bytes[l]) << LinkName(l);
  EXPECT_LE(r[1].step_time_s, r[0].step_time_s * (1 + 1e-9));
  EXPECT_LT(r[1].stall_s, r[0].stall_s);
  EXPECT_GT(r[1].optimizer_wait_s, 0.0);
  EXPECT_GE(r[1].step_time_s, compute + updates - 1e-9);
}

// A trace without optimizer-lane updates: the training thread never waits for
// the lane, and the same updates on the lane with nothing between them to
// overlap take the same step.
TEST(SimEngineTest, WithoutLaneUpdatesNothingWaitsForTheLane) {
  SpilledStates job;
  ASSERT_NO_FATAL_FAILURE(RunSpilledStates(&job));
  EXPECT_EQ(job.on_demand.optimizer_wait_s, 0.0);
  EXPECT_EQ(job.ahead.optimizer_wait_s, 0.0);
  const std::vector<double> updates = {0.25, 0.5, 1.5};
  EXPECT_EQ(RunResident(ThreeBlocks(updates, {false, false, false})).optimizer_wait_s, 0.0);
}

}  // namespace
}  // namespace tencache
