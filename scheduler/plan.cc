#include "scheduler/plan.h"

#include <algorithm>
#include <climits>
#include <map>
#include <set>
#include <string>

#include "cachemgr/size_class_pool.h"
#include "scheduler/host_tier_model.h"

namespace tencache {

Status ValidateLinkSpeeds(const LinkSpeeds& l) {
  auto positive = [](double v, const std::string& name) -> Status {
    if (v > 0) return Status::Ok();
    return Status::InvalidArgument(name + ": expected a bandwidth > 0 bytes/s");
  };
  for (Link link : kLinks) TC_RETURN_IF_ERROR(positive(l.Bps(link), std::string(LinkName(link)) + "_bps"));
  return positive(l.collective_bps, "collective_bps");
}

DType TraceDType(const Trace& trace) {
  const std::string& d = trace.header.dtype;
  return d == "fp32" ? DType::kFp32 : d == "fp16" ? DType::kFp16 : DType::kBf16;
}

namespace {

// Elements of a parameter shard of `bytes` in `dtype`.
uint64_t Elements(uint64_t bytes, DType dtype) {
  const uint64_t elem = StateElementBytes(dtype, kStateParam);
  return (bytes + elem - 1) / elem;
}

}  // namespace

uint64_t LeastHostBudget(const std::vector<uint64_t>& cache_tensor_bytes) {
  return MinimumSlotBytes(cache_tensor_bytes, kWorkerHostSlotsPerClass);
}

uint64_t HostPlacement::host_used() const {
  uint64_t t = staging;
  for (uint64_t b : host) t += b;
  return t;
}

uint64_t HostPlacement::nvme_used() const {
  uint64_t t = 0;
  for (uint64_t b : nvme) t += b;
  return t;
}

HostPlacement PlaceOnHost(const std::vector<uint64_t>& param_bytes, DType dtype, uint64_t host_budget) {
  const size_t n = param_bytes.size();
  HostPlacement p;
  uint64_t largest = 0;
  for (uint64_t b : param_bytes) largest = std::max(largest, b);
  p.staging = std::min(host_budget, 2 * largest);
  uint64_t left = host_budget - p.staging;
  // Block order, each class's tail to NVMe: gradients, then parameters.
  auto fill = [&](int state_class, Tier* home) {
    bool fits = true;
    for (size_t id = 0; id < n; ++id) {
      const uint64_t b = Elements(param_bytes[id], dtype) * StateElementBytes(dtype, state_class);
      fits = fits && b <= left;
      (fits ? p.host : p.nvme)[state_class] += b;
      if (!fits) continue;
      left -= b;
      if (home != nullptr) home[id] = Tier::kHost;
    }
  };
  p.home.assign(n, Tier::kNvme);
  p.states_on_nvme.assign(n, true);
  fill(kStateGrad, nullptr);
  fill(kStateParam, p.home.data());
  for (size_t id = 0; id < n; ++id) {
    const uint64_t count = Elements(param_bytes[id], dtype);
    uint64_t states = 0;
    for (int c : {kStateMaster, kStateAdamM, kStateAdamV}) states += count * StateElementBytes(dtype, c);
    p.states_on_nvme[id] = states > left;
    if (!p.states_on_nvme[id]) left -= states;
    for (int c : {kStateMaster, kStateAdamM, kStateAdamV}) {
      (p.states_on_nvme[id] ? p.nvme : p.host)[c] += count * StateElementBytes(dtype, c);
    }
  }
  return p;
}

StatusOr<TierLayout> LayoutTiers(const Trace& trace, const AccessSequence& seq,
                                 const TierBudgets& budgets) {
  TierLayout t;
  if (budgets.device == 0) {
    return Status::ResourceExhausted("device budget 0 bytes: expected room for at least one parameter shard");
  }
  t.device_capacity = budgets.device;
  const std::vector<uint64_t>& bytes = seq.all_bytes();
  const DType dtype = TraceDType(trace);
  const uint64_t least = HostTierModel::LeastBudget(trace);
  if (budgets.host < least) {
    return Status::ResourceExhausted("host budget " + std::to_string(budgets.host) + " bytes: expected at least " +
                                     std::to_string(least) + " bytes, the least the worker's cache accepts (" +
                                     std::to_string(kWorkerHostSlotsPerClass) + " slots of each shard size)");
  }
  HostPlacement placed = PlaceOnHost(bytes, dtype, budgets.host);
  t.home = std::move(placed.home);
  t.states_on_nvme = std::move(placed.states_on_nvme);
  t.host_used = placed.host_used();
  t.nvme_used = placed.nvme_used();
  if (budgets.nvme != 0 && t.nvme_used > budgets.nvme) {
    return Status::ResourceExhausted("nvme budget " + std::to_string(budgets.nvme) +
                                     " bytes: expected at least " + std::to_string(t.nvme_used) +
                                     " bytes for what the host cannot hold");
  }
  return t;
}

ResidencySchedule BuildBeladySchedule(const AccessSequence& seq, uint64_t capacity,
                                      const std::vector<TensorId>& resident, DeviceAccessIndex begin,
                                      DeviceAccessIndex end) {
  ResidencySchedule out;
  std::set<std::pair<DeviceAccessIndex, TensorId>> by_next;  // resident tensors, key: next use
  std::vector<DeviceAccessIndex> key(seq.num_tensors(), kNeverAccessed);
  std::vector<bool> in(seq.num_tensors(), false);
  uint64_t used = 0;
  for (TensorId id : resident) {
    const bool first = begin == DeviceAccessIndex(0);
    key[id] = seq.NextUse(id, first ? begin : begin - 1);
    if (first && seq.tensor(begin) == id) key[id] = begin;
    by_next.insert({key[id], id});
    in[id] = true;
    used += seq.bytes(id);
  }
  for (DeviceAccessIndex g = begin; g < end; ++g) {
    const TensorId x = seq.tensor(g);
    const uint64_t b = seq.bytes(x);
    ++out.accesses;
    if (in[x]) {
      ++out.hits;
      by_next.erase({key[x], x});
    } else {
      ScheduledFetch f;
      f.use = g;
      f.tensor = x;
      f.earliest_issue = begin;
      f.streamed = b > capacity;
      while (!f.streamed && used + b > capacity) {
        auto victim = std::prev(by_next.end());
        const TensorId v = victim->second;
        by_next.erase(victim);
        in[v] = false;
        used -= seq.bytes(v);
        f.evict.push_back(v);
        const DeviceAccessIndex last = seq.PrevUse(v, g);
        if (last != kNeverAccessed && last + 1 > f.earliest_issue) f.earliest_issue = last + 1;
      }
      out.fetches.push_back(std::move(f));
      if (b > capacity) continue;
      in[x] = true;
      used += b;
    }
    key[x] = seq.NextUse(x, g);
    by_next.insert({key[x], x});
  }
  for (TensorId id = 0; id < in.size(); ++id) {
    if (in[id]) out.final_resident.push_back(id);
  }
  return out;
}

namespace {

// One steady step's timeline, in which compute waits for late fetches: each
// access starts after its predecessors' compute and the waits so far; NVMe
// reads and host->device copies are FIFO lanes. REQUIRES: `fetches` in
// ascending use, at most one per access. `stall`: the step's total wait.
void TimeFetches(const AccessSequence& seq, const LinkSpeeds& links,
                 std::vector<PlannedFetch>* fetches, double* stall) {
  const size_t n = seq.size();
  std::vector<double> start(n + 1, 0);
  for (size_t k = 0; k < n; ++k) start[k + 1] = start[k] + seq.compute_s(DeviceAccessIndex(k));
  const double step = start[n];
  double nvme_free = -step, h2d_free = -step, wait = 0;
  std::vector<std::pair<int64_t, double>> waited;  // (use, wait up to and including it), ascending use
  for (PlannedFetch& f : *fetches) {
    const int64_t i = f.issue_before;
    if (i >= 0) {  // after the accesses before i and their waits
      auto after = std::lower_bound(waited.begin(), waited.end(), std::make_pair(i, -1.0));
      f.issue_s = start[size_t(i)] + (after == waited.begin() ? 0.0 : std::prev(after)->second);
    } else {
      f.issue_s = start[size_t(i + int64_t(n))] - step;
    }
    const uint64_t b = seq.bytes(f.tensor);
    double ready = f.issue_s;
    if (f.source == Tier::kNvme) {
      nvme_free = std::max(nvme_free, ready) + double(b) / links.nvme_read_bps;
      ready = nvme_free;
    }
    h2d_free = std::max(h2d_free, ready) + double(b) / links.h2d_bps;
    f.arrival_s = h2d_free;
    f.need_s = start[f.use.value()] + wait;
    wait += std::max(0.0, f.arrival_s - f.need_s);
    waited.emplace_back(int64_t(f.use.value()), wait);
  }
  *stall = wait;
}

// The steady step's fetches of a Belady schedule on `capacity` bytes (two
// warm-up steps from an empty device reach the periodic steady state), timed
// by TimeFetches (`stall`: the step's total wait).
std::vector<PlannedFetch> SteadyFetches(const AccessSequence& seq, const std::vector<Tier>& home,
                                        const LinkSpeeds& links, uint64_t capacity, double* stall) {
  const uint64_t n = seq.size();
  const ResidencySchedule s =
      BuildBeladySchedule(seq, capacity, {}, DeviceAccessIndex(0), DeviceAccessIndex::At(3, n, 0));
  std::vector<PlannedFetch> out;
  int64_t last_issue = INT64_MIN;  // issued in order: keeps the in-flight set contiguous
  for (const ScheduledFetch& f : s.fetches) {
    if (f.use < DeviceAccessIndex::At(2, n, 0)) continue;
    PlannedFetch pf;
    pf.tensor = f.tensor;
    pf.use = f.use - 2 * n;
    if (f.streamed) {
      pf.issue_before = int64_t(pf.use.value());  // copied for its access: no room to hold it earlier
    } else {
      // At most one step ahead: a fetch with nothing to evict has no earlier
      // bound from a victim, and the plan's issue table spans one step.
      pf.issue_before = std::max({last_issue, int64_t(f.earliest_issue.value()) - int64_t(2 * n),
                                   int64_t(pf.use.value()) - int64_t(n) + 1});
      last_issue = pf.issue_before;
    }
    pf.evict = f.evict;
    pf.source = home[f.tensor];
    pf.streamed = f.streamed;
    out.push_back(std::move(pf));
  }
  TimeFetches(seq, links, &out, stall);
  return out;
}

// The steady step's schedule on ScheduledCapacity's bytes: the capacity, its
// fetches and their predicted stall.
struct SteadySchedule {
  uint64_t capacity = 0;
  std::vector<PlannedFetch> fetches;
  double stall = 0;
};

SteadySchedule LeastStallSchedule(const AccessSequence& seq, const std::vector<Tier>& home, const LinkSpeeds& links,
                                  uint64_t device_capacity) {
  uint64_t largest = 0;
  for (TensorId id = 0; id < seq.num_tensors(); ++id) {
    if (seq.used(id)) largest = std::max(largest, seq.bytes(id));
  }
  std::vector<uint64_t> reserves = {0, largest, 2 * largest, 4 * largest, device_capacity / 8, device_capacity / 4};
  std::sort(reserves.begin(), reserves.end());
  reserves.erase(std::unique(reserves.begin(), reserves.end()), reserves.end());
  SteadySchedule best;
  best.capacity = device_capacity;
  for (uint64_t reserve : reserves) {  // ascending: a tie keeps the larger capacity (more hits)
    if (reserve >= device_capacity) break;
    SteadySchedule s;
    s.capacity = device_capacity - reserve;
    s.fetches = SteadyFetches(seq, home, links, s.capacity, &s.stall);
    if (reserve == 0 || s.stall < best.stall) best = std::move(s);
  }
  return best;
}

}  // namespace

uint64_t ScheduledCapacity(const AccessSequence& seq, const std::vector<Tier>& home, const LinkSpeeds& links,
                           uint64_t device_capacity) {
  return LeastStallSchedule(seq, home, links, device_capacity).capacity;
}

StatusOr<PrefetchPlan> PrefetchPlan::Build(const Trace& trace, const LinkSpeeds& links,
                                           const TierBudgets& budgets) {
  TC_RETURN_IF_ERROR(ValidateLinkSpeeds(links));
  PrefetchPlan p;
  TC_ASSIGN_OR_RETURN(p.seq_, AccessSequence::FromTrace(trace));
  TC_ASSIGN_OR_RETURN(p.layout_, LayoutTiers(trace, p.seq_, budgets));
  const uint64_t n = p.seq_.size();
  SteadySchedule steady = LeastStallSchedule(p.seq_, p.layout_.home, links, p.layout_.device_capacity);
  p.scheduled_capacity_ = steady.capacity;
  p.fetches_ = std::move(steady.fetches);
  p.predicted_stall_s_ = steady.stall;
  p.resident_tier_ = p.layout_.home;
  for (TensorId id = 0; id < p.seq_.num_tensors(); ++id) {
    if (p.seq_.used(id)) p.resident_tier_[id] = Tier::kDevice;
  }
  for (const PlannedFetch& f : p.fetches_) p.resident_tier_[f.tensor] = p.layout_.home[f.tensor];
  p.hit_rate_ = n == 0 ? 0 : 1.0 - double(p.fetches_.size()) / double(n);
  p.by_issue_.assign(n, {});
  p.fetched_.assign(n, false);
  for (size_t i = 0; i < p.fetches_.size(); ++i) {
    const int64_t k = p.fetches_[i].issue_before;
    p.by_issue_[size_t(k >= 0 ? k : k + int64_t(n))].push_back(uint32_t(i));
    p.fetched_[p.fetches_[i].use.value()] = true;
  }
  p.state_fetches_.assign(n, {});
  size_t c = 0;  // device accesses before the event
  for (const TraceEvent& e : trace.events) {
    if (e.is_device_access()) ++c;
    if (e.kind != EventKind::kAccess || e.phase != Phase::kOptimizer || c == 0 || n == 0) continue;
    p.state_fetches_[(c - 1) % n].push_back({e.block, e.pieces_begin, e.pieces_end});
  }
  return p;
}

const std::vector<PlannedStateFetch>& PrefetchPlan::StateFetchesBefore(DeviceAccessIndex k) const {
  static const std::vector<PlannedStateFetch> kNone;
  return k.value() < state_fetches_.size() ? state_fetches_[k.value()] : kNone;
}

bool PrefetchPlan::KeptUntilNextUse(TensorId id, DeviceAccessIndex k) const {
  if (id >= seq_.num_tensors() || !seq_.used(id) || fetched_.empty()) return false;
  const DeviceAccessIndex next = seq_.NextUse(id, k);
  return next != kNeverAccessed && !fetched_[next.in_step(fetched_.size())];
}

std::vector<const PlannedFetch*> PrefetchPlan::FetchesBefore(DeviceAccessIndex k) const {
  std::vector<const PlannedFetch*> out;
  if (k.value() >= by_issue_.size()) return out;
  for (uint32_t i : by_issue_[k.value()]) out.push_back(&fetches_[i]);
  return out;
}

}  // namespace tencache
