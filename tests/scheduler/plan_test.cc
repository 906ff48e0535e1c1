#include "scheduler/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "common/model_shape.h"
#include "scheduler/host_tier_model.h"
#include "scheduler/synth.h"
#include "scheduler/trace.h"

namespace tencache {
namespace {

Trace Synth(const char* preset) {
  return *SynthesizeTrace(*FindPreset(preset), SynthOptions{});
}

uint64_t Total(const std::vector<uint64_t>& v) {
  uint64_t t = 0;
  for (uint64_t b : v) t += b;
  return t;
}

// A plan for half the parameters on the device and a host that holds everything.
StatusOr<PrefetchPlan> HalfDevicePlan(const Trace& trace) {
  TierBudgets b;
  b.device = trace.TotalTensorBytes() / 2;
  b.host = 64 * trace.TotalTensorBytes();
  return PrefetchPlan::Build(trace, LinkSpeeds{}, b);
}

// Replays a schedule with every fetch issued at its earliest point (in order):
// each access must find its tensor resident, and the device never overflows.
TEST(PlanTest, EarlyIssueKeepsBeladyHitsWithinCapacity) {
  for (int pct : {15, 40, 75}) {
    const Trace trace = Synth("gpt2");
    const AccessSequence seq = *AccessSequence::FromTrace(trace);
    const uint64_t cap = Total(seq.all_bytes()) * pct / 100;
    const uint64_t n = seq.size();
    const DeviceAccessIndex end = DeviceAccessIndex::At(3, n, 0);
    ResidencySchedule s = BuildBeladySchedule(seq, cap, {}, DeviceAccessIndex(0), end);
    EXPECT_EQ(s.accesses, 3 * n);
    EXPECT_EQ(s.hits + s.fetches.size(), s.accesses);
    std::vector<bool> in(seq.num_tensors(), false);
    uint64_t used = 0;
    size_t next = 0;
    DeviceAccessIndex issue_floor;
    for (DeviceAccessIndex g; g < end; ++g) {
      while (next < s.fetches.size() &&
             (s.fetches[next].use <= g ||
              std::max(issue_floor, s.fetches[next].earliest_issue) <= g)) {
        const ScheduledFetch& f = s.fetches[next++];
        issue_floor = std::max(issue_floor, f.earliest_issue);
        for (TensorId v : f.evict) {
          // A victim is never needed between the issue and the fetched tensor's use.
          const bool first = g == DeviceAccessIndex(0);
          EXPECT_TRUE(first || seq.NextUse(v, g - 1) >= f.use) << v;
          ASSERT_TRUE(in[v]);
          in[v] = false;
          used -= seq.bytes(v);
        }
        if (f.streamed) continue;
        in[f.tensor] = true;
        used += seq.bytes(f.tensor);
        ASSERT_LE(used, cap) << "g=" << g;
      }
      const TensorId x = seq.tensor(g);
      if (seq.bytes(x) <= cap) {
        EXPECT_TRUE(in[x]) << "access " << g;
      }
    }
  }
}

TEST(PlanTest, EverythingFitsMeansNoFetchesAndDeviceResidency) {
  const Trace trace = Synth("tiny");
  TierBudgets b;
  b.device = 4 * Total(trace.TensorBytes());
  b.host = 64 * Total(trace.TensorBytes());
  StatusOr<PrefetchPlan> plan = PrefetchPlan::Build(trace, LinkSpeeds{}, b);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(plan->fetches().empty());
  EXPECT_DOUBLE_EQ(plan->device_hit_rate(), 1.0);
  EXPECT_EQ(plan->predicted_stall_s(), 0.0);
  for (TensorId id = 0; id < plan->sequence().num_tensors(); ++id) {
    EXPECT_EQ(plan->ResidentTier(id), Tier::kDevice);
  }
}

TEST(PlanTest, PlanListsFetchesByIssuePoint) {
  StatusOr<PrefetchPlan> plan = HalfDevicePlan(Synth("gpt2"));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const uint64_t n = plan->sequence().size();
  // Next use over device accesses continues into the next step.
  EXPECT_GE(plan->sequence().NextUse(0, DeviceAccessIndex(n - 1)), DeviceAccessIndex(n));
  ASSERT_FALSE(plan->fetches().empty());
  EXPECT_GT(plan->device_hit_rate(), 0.0);
  EXPECT_LT(plan->device_hit_rate(), 1.0);
  size_t listed = 0;
  int64_t prev = INT64_MIN;
  for (const PlannedFetch& f : plan->fetches()) {
    EXPECT_GE(f.issue_before, prev);  // issued in order
    prev = f.issue_before;
    EXPECT_GE(f.lookahead(), 0);
    EXPECT_EQ(plan->ResidentTier(f.tensor), Tier::kHost);
    EXPECT_GE(f.arrival_s, f.issue_s);
  }
  for (DeviceAccessIndex k; k.value() < n; ++k) {
    for (const PlannedFetch* f : plan->FetchesBefore(k)) {
      EXPECT_EQ((f->issue_before + int64_t(n)) % int64_t(n), int64_t(k.value()));
      ++listed;
    }
  }
  EXPECT_EQ(listed, plan->fetches().size());
}

// KeptUntilNextUse is exactly "the next access is not served by a fetch".
TEST(PlanTest, KeptUntilNextUseIsTheNextAccessBeingAHit) {
  StatusOr<PrefetchPlan> plan = HalfDevicePlan(Synth("gpt2"));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const AccessSequence& seq = plan->sequence();
  const uint64_t n = seq.size();
  std::vector<bool> fetched(n, false);
  for (const PlannedFetch& f : plan->fetches()) fetched[f.use.value()] = true;
  int kept = 0, refetched = 0;
  for (DeviceAccessIndex k; k.value() < n; ++k) {
    const TensorId id = seq.tensor(k);
    const uint64_t next = seq.NextUse(id, k).in_step(n);
    EXPECT_EQ(plan->KeptUntilNextUse(id, k), !fetched[next]) << "access " << k;
    (fetched[next] ? refetched : kept)++;
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(refetched, 0);
  EXPECT_FALSE(plan->KeptUntilNextUse(TensorId(seq.num_tensors()), DeviceAccessIndex(0)));  // unknown tensor
}

// Each update's states are listed once, under the device access the update
// follows, in the trace's order; nothing past the step's end.
TEST(PlanTest, StateFetchesAreListedUnderTheAccessEachUpdateFollows) {
  const Trace trace = Synth("gpt2");
  StatusOr<PrefetchPlan> plan = HalfDevicePlan(trace);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const uint64_t n = plan->sequence().size();
  std::vector<std::vector<std::pair<int, int>>> expected(n);  // per access: (block, pieces_begin)
  size_t device = 0, updates = 0;
  for (const TraceEvent& e : trace.events) {
    if (e.is_device_access()) ++device;
    if (e.kind != EventKind::kAccess || e.phase != Phase::kOptimizer || device == 0) continue;
    expected[(device - 1) % n].push_back({e.block, e.pieces_begin});
    ++updates;
  }
  ASSERT_GT(updates, 0u);
  size_t listed = 0;
  for (DeviceAccessIndex k; k.value() < n; ++k) {
    std::vector<std::pair<int, int>> got;
    for (const PlannedStateFetch& f : plan->StateFetchesBefore(k)) got.push_back({f.block, f.pieces_begin});
    EXPECT_EQ(got, expected[k.value()]) << "access " << k;
    listed += got.size();
  }
  EXPECT_EQ(listed, updates);
  EXPECT_TRUE(plan->StateFetchesBefore(DeviceAccessIndex(n)).empty());
}

TEST(PlanTest, LayoutSpillsToNvmeAndChecksBudgets) {
  const Trace trace = Synth("gpt2");
  const AccessSequence seq = *AccessSequence::FromTrace(trace);
  const uint64_t params = Total(seq.all_bytes());
  uint64_t largest = *std::max_element(seq.all_bytes().begin(), seq.all_bytes().end());
  TierBudgets b;
  b.device = params;
  b.host = 2 * params + 2 * largest + params / 2;  // fp32 gradients of bf16 parameters, staging, half the homes
  StatusOr<TierLayout> l = LayoutTiers(trace, seq, b);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->home.front(), Tier::kHost);
  EXPECT_EQ(l->home.back(), Tier::kNvme);
  EXPECT_LE(l->host_used, b.host);
  EXPECT_GT(l->nvme_used, 0u);
  b.nvme = 1;
  EXPECT_EQ(LayoutTiers(trace, seq, b).status().code(), StatusCode::kResourceExhausted);
  b.nvme = 0;
  b.host = HostTierModel::LeastBudget(trace) - 1;  // below the least the worker's cache accepts
  const Status below = LayoutTiers(trace, seq, b).status();
  EXPECT_EQ(below.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(below.message().find("expected at least " + std::to_string(b.host + 1) + " bytes"), std::string::npos)
      << below.ToString();
  b.host += 1;
  EXPECT_TRUE(LayoutTiers(trace, seq, b).ok());
  b.host = 64 * params;
  b.device = 0;
  EXPECT_EQ(LayoutTiers(trace, seq, b).status().code(), StatusCode::kResourceExhausted);
}

// Steady-step fetches of Belady's schedule on `capacity` bytes from empty (the plan's two warm-up steps).
uint64_t SteadyMisses(const AccessSequence& seq, uint64_t capacity) {
  const uint64_t n = seq.size();
  const ResidencySchedule s = BuildBeladySchedule(seq, capacity, {}, DeviceAccessIndex(0), DeviceAccessIndex::At(3, n, 0));
  uint64_t misses = 0;
  for (const ScheduledFetch& f : s.fetches) misses += f.use >= DeviceAccessIndex::At(2, n, 0);
  return misses;
}

// The whole device budget caches parameters (gradients take none of it); the
// schedule keeps a staging reserve only where that lowers the predicted stall.
TEST(PlanTest, ScheduledCapacityKeepsAReserveOnlyWhereItLowersTheStall) {
  // Links so fast that no schedule stalls: no reserve, Belady's hits on the whole budget.
  {
    const Trace trace = Synth("gpt2");
    const AccessSequence seq = *AccessSequence::FromTrace(trace);
    TierBudgets b;
    b.host = 64 * trace.TotalTensorBytes();
    b.device = trace.TotalTensorBytes() / 10;
    LinkSpeeds fast;
    for (Link link : kLinks) fast.Bps(link) = 1e30;
    const PrefetchPlan plan = *PrefetchPlan::Build(trace, fast, b);
    EXPECT_EQ(plan.layout().device_capacity, b.device);
    EXPECT_EQ(plan.scheduled_capacity(), b.device);
    EXPECT_LT(plan.predicted_stall_s(), 1e-15);
    EXPECT_EQ(plan.fetches().size(), SteadyMisses(seq, b.device));
  }
  // OPT-1.3B on a tenth of its parameter bytes: with the whole budget scheduled
  // every fetch waits for a victim's last use; a reserve lowers the stall, at
  // the price of hits.
  {
    const Trace trace = Synth("opt-1.3b");
    const AccessSequence seq = *AccessSequence::FromTrace(trace);
    TierBudgets b;
    b.host = 64 * trace.TotalTensorBytes();
    b.device = trace.TotalTensorBytes() / 10;
    const PrefetchPlan plan = *PrefetchPlan::Build(trace, LinkSpeeds{}, b);
    EXPECT_EQ(plan.layout().device_capacity, b.device);
    EXPECT_LT(plan.scheduled_capacity(), b.device);
    EXPECT_GT(plan.scheduled_capacity(), 0u);
    EXPECT_EQ(plan.fetches().size(), SteadyMisses(seq, plan.scheduled_capacity()));
    EXPECT_GT(plan.fetches().size(), SteadyMisses(seq, b.device));
    EXPECT_EQ(ScheduledCapacity(seq, plan.layout().home, LinkSpeeds{}, b.device), plan.scheduled_capacity());
  }
}

// A steady-state fetch with nothing to evict must still be issued within the
// one step a plan spans (an issue point at -2N would write before by_issue_'s
// start): every issue point lies in [use - N + 1, use], every fetch listed once.
TEST(PlanTest, EveryIssuePointLiesWithinOneStepOfItsUse) {
  for (uint64_t bytes : {200u, 300u, 450u}) {
    std::stringstream text;
    text << R"({"format":"tencache-trace","version":1,"model":"custom","dtype":"fp32"})" << "\n";
    const char* order[][2] = {{"0", "fwd"}, {"1", "fwd"}, {"1", "bwd"}, {"0", "bwd"}};
    double t = 0;
    for (const auto& a : order) {
      text << R"({"type":"access","id":)" << a[0] << R"(,"name":"t)" << a[0] << R"(","phase":")" << a[1]
           << R"(","block":)" << a[0] << R"(,"bytes":)" << bytes << R"(,"start_s":)" << t << R"(,"end_s":)"
           << t + 0.001 << "}\n";
      t += 0.001;
    }
    StatusOr<Trace> trace = ParseTrace(text, "two.jsonl");
    ASSERT_TRUE(trace.ok()) << trace.status().ToString();
    for (uint64_t device : {100u, 300u, 500u, 700u}) {
      TierBudgets b;
      b.device = device;
      b.host = 1 << 20;
      StatusOr<PrefetchPlan> plan = PrefetchPlan::Build(*trace, LinkSpeeds{}, b);
      if (!plan.ok()) continue;  // a budget below the layout's minimum
      const int64_t n = int64_t(plan->sequence().size());
      for (const PlannedFetch& f : plan->fetches()) {
        EXPECT_GE(f.issue_before, int64_t(f.use.value()) - n + 1) << bytes << " B tensors, device " << device;
        EXPECT_LE(f.issue_before, int64_t(f.use.value()));
      }
      size_t listed = 0;
      for (DeviceAccessIndex k; k < DeviceAccessIndex(uint64_t(n)); ++k) listed += plan->FetchesBefore(k).size();
      EXPECT_EQ(listed, plan->fetches().size()) << bytes << " B tensors, device " << device;
    }
  }
}

}  // namespace
}  // namespace tencache
