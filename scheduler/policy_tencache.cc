// tencache's policy: the PrefetchPlan's rules, run online. The profiling step
// fetches on demand with LRU eviction (there is no order to plan from yet). At
// the start of the next step the Belady schedule of every remaining access is
// built from the device's current contents (BuildBeladySchedule) on the bytes
// the worker's plan fills (ScheduledCapacity: the capacity less a staging
// reserve chosen for the least predicted stall); each fetch is
// then issued, in schedule order, as soon as (1) every tensor it evicts has had
// its last use before the fetched tensor's use, (2) its use lies in the current
// step (a tensor is never fetched before the optimizer has updated it), and
// (3) on a PCIe lane shared with collectives, it would finish before the next
// all-gather can start, so a prefetch for a later layer never delays the
// all-gather the current layer waits on. A fetch whose use has come is issued
// regardless (a demand fetch). Hits therefore equal Belady's from that state
// on the scheduled capacity.
#include "scheduler/policies.h"

namespace tencache {

namespace {

class TencachePolicy : public SimPolicy {
 public:
  const char* name() const override { return "tencache"; }
  bool PrefetchesStates() const override { return true; }

  void BeginStep(SimContext& s) override {
    if (!lru_) lru_ = std::make_unique<KeyedResidents>(s.seq().num_tensors());
    if (s.step() != 1) return;
    std::vector<TensorId> resident;
    for (TensorId t = 0; t < s.seq().num_tensors(); ++t) {
      if (s.resident(t)) resident.push_back(t);
    }
    const uint64_t n = s.seq().size();
    const uint64_t capacity = ScheduledCapacity(s.seq(), s.layout().home, s.links(), s.capacity());
    schedule_ = BuildBeladySchedule(s.seq(), capacity, resident, DeviceAccessIndex::At(1, n, 0),
                                    DeviceAccessIndex::At(uint64_t(s.total_steps()), n, 0));
    next_ = 0;
    planned_ = true;
  }

  void BeforeAccess(DeviceAccessIndex g, SimContext& s) override {
    if (planned_) Issue(g, /*demand_until=*/g, s);
  }
  void MakeRoom(TensorId id, DeviceAccessIndex g, SimContext& s) override {
    // Planned steps never get here unless the trace outgrew the plan.
    if (planned_) ++deviations_;
    EvictUntilFits(id, /*largest=*/false, *lru_, s);
  }
  void OnAccess(DeviceAccessIndex g, SimContext& s) override {
    const TensorId x = s.seq().tensor(g);
    if (!planned_ && s.resident(x)) lru_->Set(x, g.value());
  }
  void AfterAccess(DeviceAccessIndex g, SimContext& s) override {
    if (planned_) Issue(g + 1, /*demand_until=*/g, s);
  }

 private:
  // Issues, in order, every fetch allowed before access `position`; fetches
  // whose use is <= demand_until are issued unconditionally.
  void Issue(DeviceAccessIndex position, DeviceAccessIndex demand_until, SimContext& s) {
    const DeviceAccessIndex step_end = DeviceAccessIndex::At(uint64_t(s.step() + 1), s.seq().size(), 0);
    while (next_ < schedule_.fetches.size()) {
      const ScheduledFetch& f = schedule_.fetches[next_];
      const bool demand = f.use <= demand_until;
      if (!demand) {
        if (f.use >= step_end || f.earliest_issue > position) return;
        if (!f.streamed && s.PredictArrival(f.tensor) > s.NextPcieCollective()) return;
      }
      for (TensorId v : f.evict) s.Evict(v);
      if (!f.streamed && !s.Fetch(f.tensor, /*staged=*/!demand)) ++deviations_;
      ++next_;
    }
  }

  std::unique_ptr<KeyedResidents> lru_;  // the profiling step only
  ResidencySchedule schedule_;
  size_t next_ = 0;
  bool planned_ = false;
  uint64_t deviations_ = 0;
};

}  // namespace

std::unique_ptr<SimPolicy> MakeTencachePolicy() { return std::make_unique<TencachePolicy>(); }

}  // namespace tencache
