#include "scheduler/host_tier_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "cachemgr/size_class_pool.h"
#include "common/byte_size.h"
#include "common/model_shape.h"
#include "common/shard_bytes.h"
#include "scheduler/sim_engine.h"

namespace tencache {
namespace {

// A trace as the worker writes it: one tensor per block (id = block), forward
// 0..n-1, then backward n-1..0 with each block's update right after it.
Trace BlockTrace(const std::vector<uint64_t>& params, const std::string& dtype, double compute_s = 1e-3,
                 double update_s = 1e-3) {
  Trace t;
  t.header.dtype = dtype;
  double now = 0;
  auto access = [&](size_t id, Phase phase, double seconds) {
    TraceEvent e;
    e.id = TensorId(id);
    e.name = "block" + std::to_string(id) + ".param";
    e.phase = phase;
    e.block = int(id);
    e.bytes = params[id];
    e.start_s = now;
    e.end_s = now += seconds;
    t.events.push_back(e);
  };
  for (size_t b = 0; b < params.size(); ++b) access(b, Phase::kForward, compute_s);
  for (size_t b = params.size(); b-- > 0;) {
    access(b, Phase::kBackward, 2 * compute_s);
    access(b, Phase::kOptimizer, update_s);
  }
  return t;
}

Trace WorkerTrace(const ModelShape& model, DType dtype, int ranks) {
  return BlockTrace(ShardTensorBytes(model, dtype, ranks).params, DTypeName(dtype));
}

std::vector<uint64_t> Sorted(std::vector<uint64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// One accounting: the simulator's host tier holds the tensors the worker's
// cache registers (common/shard_bytes.h, GPT-2's tied embedding in pieces), and
// plans their slots as TensorCache::Setup does.
TEST(HostTierModel, HoldsTheWorkersCacheTensorsInTheCachesSlotPlan) {
  ModelShape gpt2 = *FindPreset("gpt2");
  gpt2.seq_len = 128;
  for (DType dtype : {DType::kBf16, DType::kFp32}) {
    for (int ranks : {1, 2}) {
      SCOPED_TRACE(std::string(DTypeName(dtype)) + ", ranks " + std::to_string(ranks));
      const ShardTensors worker = ShardTensorBytes(gpt2, dtype, ranks);
      const Trace trace = WorkerTrace(gpt2, dtype, ranks);
      const uint64_t budget = 400 * kMiB;
      StatusOr<HostTierModel> m = HostTierModel::Create(trace, budget);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      EXPECT_EQ(Sorted(m->all_bytes()), Sorted(worker.all));
      EXPECT_GT(m->pieces(0), 1);  // the embedding is cut
      const std::vector<SizeClass> classes = BuildHistogram(worker.all);
      StatusOr<SlotPlan> plan = PlanSlots(SlotPlanner::kMaxResident, classes, budget, kWorkerHostSlotsPerClass);
      ASSERT_TRUE(plan.ok());
      ASSERT_EQ(m->num_classes(), classes.size());
      for (size_t c = 0; c < classes.size(); ++c) EXPECT_EQ(m->slots(int(c)), plan->slots[c]) << "class " << c;
      for (uint32_t t = 0; t < m->num_tensors(); ++t)
        EXPECT_EQ(classes[m->size_class(t)].slot_bytes, SlotBytesFor(m->bytes(t)));
    }
  }
}

// An update acquires as Trainer::UpdateBlock does: mixed precision, per piece
// the master and both moments, the 16-bit parameter overwritten after the first
// piece; fp32, the parameter (its own master) first, read and written.
TEST(HostTierModel, AnUpdateAcquiresAsTheWorkerDoes) {
  const std::vector<uint64_t> params = {3 * 16384 * 2 * 4, 16384 * 2, 16384 * 2, 16384 * 2};
  StatusOr<HostTierModel> mixed = HostTierModel::Create(BlockTrace(params, "bf16"), kGiB);
  ASSERT_TRUE(mixed.ok());
  ASSERT_EQ(mixed->pieces(0), 12);  // 12 x 16384 elements against a 16384-element layer
  const std::vector<HostStepEvent> u = mixed->update(0);
  ASSERT_EQ(u.size(), 12u * 3 + 1);
  EXPECT_EQ(u[3].tensor, mixed->param(0));
  EXPECT_EQ(u[3].event.mode, AccessMode::kOverwrite);
  EXPECT_EQ(u[3].event.piece, 0);
  for (size_t i : {0, 1, 2, 4, 5, 6}) {
    EXPECT_EQ(u[i].event.mode, AccessMode::kWrite);
    EXPECT_NE(u[i].tensor, mixed->param(0));
    EXPECT_EQ(mixed->bytes(u[i].tensor), 16384u * 4);
  }
  EXPECT_EQ(u[4].event.piece, 1);

  StatusOr<HostTierModel> fp32 = HostTierModel::Create(BlockTrace({16384 * 4, 16384 * 4}, "fp32"), kGiB);
  ASSERT_TRUE(fp32.ok());
  const std::vector<HostStepEvent> f = fp32->update(1);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].tensor, fp32->param(1));
  EXPECT_EQ(f[0].event.mode, AccessMode::kWrite);
  EXPECT_EQ(fp32->bytes(f[1].tensor), 16384u * 4);
}

// A tied embedding (block 0, `pieces` state pieces) and `layers` layers, as
// the worker writes it: the embedding's split update follows its access as
// the head and streams, part s of L (after the head, then after each layer's
// backward) ending at piece ceil(P s / L); the lookup's backward comes last.
// `whole`: one update after the lookup instead.
Trace TiedTrace(int layers, int pieces, bool whole, double compute_s = 1e-3) {
  std::vector<uint64_t> params(size_t(layers) + 2, 16384 * 2);
  params[0] = uint64_t(pieces) * 16384 * 2;
  Trace t;
  t.header.dtype = "bf16";
  double now = 0;
  auto access = [&](int id, Phase phase, double seconds, int first = 0, int last = 0) {
    TraceEvent e;
    e.id = TensorId(id);
    e.name = "block" + std::to_string(id) + ".param";
    e.phase = phase;
    e.block = id;
    e.bytes = params[size_t(id)];
    e.start_s = now;
    e.end_s = now += seconds;
    e.pieces_begin = first;
    e.pieces_end = last;
    t.events.push_back(e);
  };
  const int head = layers + 1;
  for (int b = 0; b <= head; ++b) access(b, Phase::kForward, compute_s);
  access(head, Phase::kBackward, compute_s);
  access(head, Phase::kOptimizer, compute_s / 4);
  access(0, Phase::kBackward, compute_s);  // the head
  int done = 0, stage = 0;
  auto part = [&] {
    const int upto = (pieces * ++stage + layers - 1) / layers;
    if (!whole && upto > done) access(0, Phase::kOptimizer, compute_s / 4, done, upto);
    done = std::max(done, upto);
  };
  part();
  for (int b = layers; b >= 1; --b) {
    access(b, Phase::kBackward, 2 * compute_s);
    access(b, Phase::kOptimizer, compute_s / 4);
    if (b > 1) part();
  }
  access(0, Phase::kBackward, compute_s);  // the lookup
  if (whole) access(0, Phase::kOptimizer, compute_s / 2);
  return t;
}

// Each part of a streamed update acquires its own pieces where it runs (and
// the parameter after its first piece), and a split update stores no
// gradient: the head's access feeds it, the lookup's comes after it and is
// followed by the write of the held rows into the parameter. The whole update
// stores the head's gradient (12 pieces) and reads it back.
TEST(HostTierModel, AStreamedUpdatesPartsAcquireTheirPiecesWhereTheyRun) {
  StatusOr<HostTierModel> split = HostTierModel::Create(TiedTrace(2, 12, false), kGiB);
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  ASSERT_EQ(split->pieces(0), 12);
  // 9 device accesses, 3 layer-sized updates (3 states and the parameter),
  // the embedding's 12 x 3 states, its parameter once per part (2) and the
  // held rows' write after the lookup.
  EXPECT_EQ(split->step_acquires(), 9u + 3 * 4 + 36 + 2 + 1);
  const std::vector<HostStepEvent> u = split->update(0);
  const uint32_t master6 = u[3 * 6 + 1].tensor;  // piece 6's first state: after piece 0's parameter
  EXPECT_EQ(u[3 * 6 + 1].event.piece, 6);
  // fwd 0-3, bwd 3, update 3 (4), bwd 0, part 1 (18 states + parameter), bwd 2, update 2 (4): position 34.
  EXPECT_EQ(split->NextUse(master6, AcquireIndex(0)), AcquireIndex(34));
  EXPECT_EQ(split->NextUse(u[0].tensor, AcquireIndex(0)), AcquireIndex(10));
  StatusOr<HostTierModel> whole = HostTierModel::Create(TiedTrace(2, 12, true), kGiB);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->step_acquires(), 9u + 3 * 4 + 37 + 12 + 12);  // and the gradient stored, then read
}

// The next use follows the step's acquire order and wraps into the next step.
TEST(HostTierModel, NextUseFollowsTheAcquireOrderAcrossSteps) {
  StatusOr<HostTierModel> m = HostTierModel::Create(BlockTrace({32768, 32768}, "bf16"), kGiB);
  ASSERT_TRUE(m.ok());
  // fwd 0, fwd 1, bwd 1, update 1 (m, v, master: 3 + the parameter), bwd 0, update 0.
  const uint64_t n = m->step_acquires();
  ASSERT_EQ(n, 2u + 2 * (1 + 4));
  EXPECT_EQ(m->NextUse(m->param(1), AcquireIndex(0)), AcquireIndex(1));
  EXPECT_EQ(m->NextUse(m->param(1), AcquireIndex(1)), AcquireIndex(2));
  EXPECT_EQ(m->NextUse(m->param(0), AcquireIndex(7)), AcquireIndex(11));  // its overwrite in update 0
  EXPECT_EQ(m->NextUse(m->param(0), AcquireIndex(11)), AcquireIndex(n));  // fwd 0 of the next step
  const uint32_t master1 = m->update(1)[0].tensor;
  EXPECT_EQ(m->NextUse(master1, AcquireIndex(3)), AcquireIndex(n + 3));
}

TEST(HostTierModel, RefusesLessThanTheLeastBudgetAndNamesIt) {
  const Trace trace = BlockTrace({65536, 65536, 65536}, "bf16");
  const uint64_t least = HostTierModel::LeastBudget(trace);
  EXPECT_TRUE(HostTierModel::Create(trace, least).ok());
  const Status st = HostTierModel::Create(trace, least - 4096).status();
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("host tier"), std::string::npos) << st.message();
}

// Runs `trace` with every parameter on the device (only the host tier moves
// NVMe bytes) and the states fetched on demand or ahead.
class DemandPolicy : public SimPolicy {
 public:
  explicit DemandPolicy(bool ahead) : ahead_(ahead) {}
  const char* name() const override { return ahead_ ? "ahead" : "on-demand"; }
  void MakeRoom(TensorId, DeviceAccessIndex, SimContext&) override {}
  bool PrefetchesStates() const override { return ahead_; }

 private:
  bool ahead_;
};

PolicyResult Simulate(const Trace& trace, uint64_t host, bool ahead, double nvme_bps = 1e9) {
  SimConfig c;
  c.budgets.device = 4 * trace.TotalTensorBytes();
  c.budgets.host = host;
  c.links.nvme_read_bps = c.links.nvme_write_bps = nvme_bps;
  c.steps = 2;
  StatusOr<CacheSimulator> sim = CacheSimulator::Create(trace, c);
  EXPECT_TRUE(sim.ok()) << sim.status().ToString();
  DemandPolicy p(ahead);
  return sim->Run(p);
}

// With room for everything nothing moves. At the least budget the three
// state slots are the update's own, so every state piece is read and written
// once a step; with six more slots, the next-use victims keep some across the
// step — never a piece read or written twice (at most one miss per piece).
TEST(HostTierModel, EachSpilledStateByteIsReadAndWrittenOnceAStep) {
  const std::vector<uint64_t> params(6, 64 * kKiB);  // 32Ki bf16 elements: 128 KiB fp32 states
  const Trace trace = BlockTrace(params, "bf16");
  const uint64_t piece = 128 * kKiB, states = 6 * 3 * piece;
  StatusOr<HostTierModel> m = HostTierModel::Create(trace, kGiB);
  ASSERT_TRUE(m.ok());
  uint64_t all = 0;
  for (uint32_t t = 0; t < m->num_tensors(); ++t) all += m->bytes(t);
  const PolicyResult roomy = Simulate(trace, all + 64 * kMiB, false);
  EXPECT_EQ(roomy.bytes[Link::kNvmeRead], 0u);
  EXPECT_EQ(roomy.bytes[Link::kNvmeWrite], 0u);
  const uint64_t least = HostTierModel::LeastBudget(trace);
  for (bool ahead : {false, true}) {
    const PolicyResult tight = Simulate(trace, least, ahead);
    SCOPED_TRACE(tight.policy);
    EXPECT_EQ(tight.bytes[Link::kNvmeRead], states);
    EXPECT_EQ(tight.bytes[Link::kNvmeWrite], states);
    const PolicyResult more = Simulate(trace, least + 6 * piece, ahead);
    EXPECT_EQ(more.bytes[Link::kNvmeRead], more.bytes[Link::kNvmeWrite]);
    EXPECT_LT(more.bytes[Link::kNvmeRead], states);
    EXPECT_GE(more.bytes[Link::kNvmeRead], states - 6 * piece);  // at most the six extra slots' pieces stay
    EXPECT_EQ(more.bytes[Link::kNvmeRead] % piece, 0u);
  }
}

// The host-tier rule: a read into a dirty victim's slot waits for its
// write-back. At the least budget an update's three state pieces take the
// class's three slots, whose previous pieces are dirty: each read follows its
// victim's write-back, so the step lasts at least the reads plus one piece's
// write-back per update (without the rule the reads start at once and it
// lasts about the reads alone).
TEST(HostTierModel, AReadIntoADirtyVictimsSlotWaitsForItsWriteBack) {
  const std::vector<uint64_t> params(6, 64 * kKiB);
  const Trace trace = BlockTrace(params, "bf16", 1e-6, 1e-6);
  const double bps = 0.1e9;
  for (bool ahead : {false, true}) {
    const PolicyResult r = Simulate(trace, HostTierModel::LeastBudget(trace), ahead, bps);
    const double reads = r.lanes[StepLane::kNvmeRead], writes = r.lanes[StepLane::kNvmeWrite];
    ASSERT_GT(writes, 0) << r.policy;
    EXPECT_GE(r.step_time_s, (reads + writes / 3) * (1 - 1e-9)) << r.policy << ": reads " << reads << " s, writes " << writes;
  }
}

// Streamed one piece a layer, the embedding's states are read while the layers
// compute; whole, after the backward, while nothing does: the same bytes, less stall.
TEST(HostTierModel, AStreamedUpdateWaitsLessForTheSameBytes) {
  const Trace split = TiedTrace(4, 4, false, 2e-3), whole = TiedTrace(4, 4, true, 2e-3);
  const uint64_t host = std::max<uint64_t>(HostTierModel::LeastBudget(whole), 1280 * kKiB);  // the tier layout's floor
  const PolicyResult s = Simulate(split, host, true, 0.5e9), w = Simulate(whole, host, true, 0.5e9);
  std::printf("stall: streamed %.6f s, whole %.6f s; NVMe read %llu / %llu bytes\n", s.stall_s, w.stall_s,
              (unsigned long long)s.bytes[Link::kNvmeRead], (unsigned long long)w.bytes[Link::kNvmeRead]);
  EXPECT_LT(s.stall_s, 0.7 * w.stall_s);  // measured: 0.98 against 1.70 ms
  EXPECT_LE(s.bytes[Link::kNvmeRead], w.bytes[Link::kNvmeRead]);
}

// Read ahead (from the release of the access before the update's), each
// update's states are mostly read while the backward computes; on demand
// every read is waited for. The same bytes either way.
TEST(HostTierModel, StatesReadAheadOverlapTheBackward) {
  const std::vector<uint64_t> params(6, 64 * kKiB);  // 128 KiB fp32 state pieces, three per update
  const Trace trace = BlockTrace(params, "bf16", 1e-3, 1e-3);
  const double read_s = 2.5e-3;  // one update's three pieces; an update every 3 ms
  SimConfig c;
  c.budgets.device = 4 * trace.TotalTensorBytes();
  c.budgets.host = HostTierModel::LeastBudget(trace) + 6 * 128 * kKiB;
  c.links.nvme_read_bps = 3 * 128 * kKiB / read_s;
  c.links.nvme_write_bps = 1000 * c.links.nvme_read_bps;  // the reads alone
  c.steps = 2;
  StatusOr<CacheSimulator> sim = CacheSimulator::Create(trace, c);
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  DemandPolicy ahead(true), demand(false);
  const PolicyResult a = sim->Run(ahead), d = sim->Run(demand);
  std::printf("stall: ahead %.6f s, on demand %.6f s; NVMe read %llu / %llu bytes\n", a.stall_s, d.stall_s,
              (unsigned long long)a.bytes[Link::kNvmeRead], (unsigned long long)d.bytes[Link::kNvmeRead]);
  EXPECT_LT(a.stall_s, 0.2 * d.stall_s);  // measured: 1.74 against 9.99 ms
  EXPECT_EQ(a.bytes[Link::kNvmeRead], d.bytes[Link::kNvmeRead]);
}

// Records, at each access's end, that end and when the simulator says the
// worker staged the parameters fetched next (HostIssueTime(kHostTierLead)).
class LeadProbe : public SimPolicy {
 public:
  const char* name() const override { return "lead-probe"; }
  void MakeRoom(TensorId, DeviceAccessIndex, SimContext&) override {}
  void AfterAccess(DeviceAccessIndex, SimContext& s) override {
    ends.push_back(s.now());
    issued.push_back(s.HostIssueTime(kHostTierLead));
  }
  std::vector<double> ends, issued;
};

// At access g's release the worker issues the device fetches for g + 1 and
// stages the parameters of those for g + 1 + kHostTierLead: those for g + 1
// were staged kHostTierLead releases earlier, at access g - kHostTierLead's end.
TEST(HostTierModel, ParametersAreStagedKHostTierLeadAccessesAhead) {
  const Trace trace = BlockTrace(std::vector<uint64_t>(4, 64 * kKiB), "bf16", 1e-3, 0);
  SimConfig c;
  c.budgets.device = 4 * trace.TotalTensorBytes();
  c.budgets.host = 64 * kMiB;
  c.steps = 1;
  StatusOr<CacheSimulator> sim = CacheSimulator::Create(trace, c);
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  LeadProbe probe;
  sim->Run(probe);
  ASSERT_EQ(probe.ends.size(), probe.issued.size());
  ASSERT_GT(probe.ends.size(), size_t(kHostTierLead) + 2);
  for (size_t g = kHostTierLead; g < probe.ends.size(); ++g) {
    EXPECT_EQ(probe.issued[g], probe.ends[g - kHostTierLead]) << "access " << g;
  }
}

}  // namespace
}  // namespace tencache
