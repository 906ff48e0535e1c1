#include "scheduler/sim_engine.h"

#include <algorithm>
#include <string>

namespace tencache {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

SimContext::SimContext(const CacheSimulator& sim) : sim_(sim) {
  const size_t n = sim.seq_.num_tensors();
  resident_.assign(n, false);
  fresh_.assign(n, false);
  arrival_.assign(n, 0);
  grad_ready_.assign(n, 0);
  const LinkSpeeds& l = sim.config_.links;
  nvme_read_.bps = l.nvme_read_bps;
  nvme_write_.bps = l.nvme_write_bps;
  h2d_.bps = l.h2d_bps;
  d2h_.bps = l.d2h_bps;
  net_.bps = l.collective_bps;
}

const AccessSequence& SimContext::seq() const { return sim_.seq_; }
const TierLayout& SimContext::layout() const { return sim_.layout_; }
uint64_t SimContext::capacity() const { return sim_.layout_.device_capacity; }
int SimContext::total_steps() const {
  return sim_.config_.warmup_steps + sim_.config_.steps;
}
uint64_t SimContext::elem_bytes() const { return sim_.elem_bytes_; }

void SimContext::Evict(TensorId id) {
  if (!resident_[id]) return;
  resident_[id] = false;
  used_ -= sim_.seq_.bytes(id);  // parameters are clean: the host home is current
}

double SimContext::PredictArrival(TensorId id) const {
  const double b = double(sim_.seq_.bytes(id));
  double ready = now_;
  if (sim_.layout_.home[id] == Tier::kNvme) {
    ready = std::max(nvme_read_.free_at, ready) + b / nvme_read_.bps;
  }
  return std::max(h2d_.free_at, ready) + sim_.CopySeconds(sim_.seq_.bytes(id), h2d_);
}

bool SimContext::Fetch(TensorId id) {
  const uint64_t b = sim_.seq_.bytes(id);
  if (resident_[id] || b > free_bytes()) return false;
  double ready = now_;
  if (sim_.layout_.home[id] == Tier::kNvme) {
    ready = nvme_read_.Reserve(ready, double(b) / nvme_read_.bps);
    if (counting_) totals_.bytes_nvme_read += b;
  }
  arrival_[id] = h2d_.Reserve(ready, sim_.CopySeconds(b, h2d_));
  if (counting_) totals_.bytes_h2d += b;
  resident_[id] = true;
  fresh_[id] = true;
  used_ += b;
  return true;
}

void SimContext::WaitForArrival(TensorId id) {
  if (!resident_[id] || arrival_[id] <= now_) return;
  if (counting_) totals_.stall_s += arrival_[id] - now_;
  now_ = arrival_[id];
}

int SimContext::ranks() const { return sim_.trace_.header.ranks; }

double SimContext::NextPcieCollective() const {
  if (!sim_.config_.links.collectives_share_pcie) return kInf;
  const size_t next = sim_.next_gather_[pos_];
  if (next >= sim_.trace_.events.size()) return kInf;
  return now_ + sim_.compute_before_[next] - sim_.compute_before_[pos_];
}

StatusOr<CacheSimulator> CacheSimulator::Create(const Trace& trace, const SimConfig& config) {
  TC_RETURN_IF_ERROR(ValidateLinkSpeeds(config.links));
  if (config.steps < 1 || config.warmup_steps < 1) {
    return Status::InvalidArgument("steps and warmup_steps: expected at least 1 each");
  }
  if (!(config.copy_latency_s >= 0 && config.copy_latency_s < 1)) {
    return Status::InvalidArgument("copy latency: expected seconds in [0, 1), got " +
                                   std::to_string(config.copy_latency_s));
  }
  CacheSimulator sim;
  sim.trace_ = trace;
  sim.config_ = config;
  TC_ASSIGN_OR_RETURN(sim.seq_, AccessSequence::FromTrace(trace));
  TC_ASSIGN_OR_RETURN(sim.layout_, LayoutTiers(trace, sim.seq_, config.budgets));
  sim.elem_bytes_ = trace.header.dtype == "fp32" ? 4 : 2;
  const size_t m = trace.events.size();
  sim.compute_before_.assign(m + 1, 0);
  for (size_t i = 0; i < m; ++i) {
    const TraceEvent& e = trace.events[i];
    sim.compute_before_[i + 1] = sim.compute_before_[i] + (e.is_device_access() ? e.duration_s() : 0);
  }
  sim.next_gather_.assign(m + 1, m);
  for (size_t i = m; i-- > 0;) {
    const TraceEvent& e = trace.events[i];
    const bool gather = e.kind == EventKind::kCollective && e.collective == CollectiveKind::kAllGather;
    sim.next_gather_[i] = gather ? i : sim.next_gather_[i + 1];
  }
  return sim;
}

double CacheSimulator::Stream(TensorId id, SimContext& s) const {
  const uint64_t b = seq_.bytes(id);
  double ready = s.now_;
  if (layout_.home[id] == Tier::kNvme) {
    ready = s.nvme_read_.Reserve(ready, double(b) / s.nvme_read_.bps);
    if (s.counting_) s.totals_.bytes_nvme_read += b;
  }
  if (s.counting_) s.totals_.bytes_h2d += b;
  return s.h2d_.Reserve(ready, CopySeconds(b, s.h2d_));
}

double CacheSimulator::CopySeconds(uint64_t bytes, const Lane& lane) const {
  return config_.copy_latency_s + double(bytes) / lane.bps;
}

void CacheSimulator::RunAccess(const TraceEvent& e, AccessIndex g, SimPolicy& policy,
                               SimContext& s) const {
  auto wait_until = [&](double t) {
    if (t <= s.now_) return;
    if (s.counting_) s.totals_.stall_s += t - s.now_;
    s.now_ = t;
  };
  auto gather = s.gather_end_.find(e.block);
  if (gather != s.gather_end_.end()) {
    wait_until(gather->second);
    s.gather_end_.erase(gather);
  }
  policy.BeforeAccess(g, s);
  const TensorId x = e.id;
  const bool hit = s.resident_[x] && !s.fresh_[x];
  double ready = s.now_;
  if (s.resident_[x]) {
    ready = s.arrival_[x];
  } else {
    if (seq_.bytes(x) <= layout_.device_capacity) policy.MakeRoom(x, g, s);
    ready = s.Fetch(x) ? s.arrival_[x] : Stream(x, s);
  }
  if (s.counting_) {
    s.hits_ += hit;
    s.host_served_ += !hit && layout_.home[x] == Tier::kHost;
  }
  wait_until(ready);
  s.fresh_[x] = false;
  policy.OnAccess(g, s);
  s.access_start_ = s.now_;
  s.now_ += e.duration_s();
  s.compute_busy_ += e.duration_s();
  if (e.phase == Phase::kBackward) {  // the gradient shard goes to the host
    s.grad_ready_[x] = s.d2h_.Reserve(s.now_, CopySeconds(e.bytes, s.d2h_));
    if (s.counting_) s.totals_.bytes_d2h += e.bytes;
  }
  ++s.pos_;
  policy.AfterAccess(g, s);
}

void CacheSimulator::RunCollective(const TraceEvent& e, SimContext& s) const {
  Lane* pcie = nullptr;
  if (config_.links.collectives_share_pcie) {
    pcie = e.collective == CollectiveKind::kAllGather ? &s.h2d_ : &s.d2h_;
  }
  const double unloaded = std::max(s.now_, s.net_.free_at);
  const double start = pcie ? std::max(unloaded, pcie->free_at) : unloaded;
  if (s.counting_ && e.collective == CollectiveKind::kAllGather) {
    s.totals_.collective_delay_s += start - unloaded;
  }
  const double end = start + double(e.bytes) / s.net_.bps;
  s.net_.free_at = end;
  s.net_.busy += end - start;
  if (pcie) {
    pcie->free_at = end;
    pcie->busy += end - start;
  }
  if (e.collective == CollectiveKind::kAllGather) s.gather_end_[e.block] = end;
}

void CacheSimulator::RunOptimizer(const TraceEvent& e, const SimPolicy& policy, SimContext& s) const {
  const TensorId x = e.id;
  const uint64_t b = e.bytes;
  const uint64_t states = b / elem_bytes_ * 12;
  double ready = std::max(s.now_, s.grad_ready_[x]);
  if (layout_.states_on_nvme[x]) {
    double issue = policy.PrefetchesStates() ? std::min(s.now_, s.access_start_) : s.now_;
    // The host-tier rule (TensorCache): the read evicts the victim a demand
    // miss would, the states of the previous update that spilled (its next use
    // is the furthest), so it starts once they are written back.
    issue = std::max(issue, s.state_victim_free_);
    ready = std::max(ready, s.nvme_read_.Reserve(issue, double(states) / s.nvme_read_.bps));
    if (s.counting_) s.totals_.bytes_nvme_read += states;
  }
  s.cpu_free_ = std::max(s.cpu_free_, ready) + e.duration_s();
  s.cpu_busy_ += e.duration_s();
  if (layout_.states_on_nvme[x]) {
    s.state_victim_free_ = s.nvme_write_.Reserve(s.cpu_free_, double(states) / s.nvme_write_.bps);
    if (s.counting_) s.totals_.bytes_nvme_write += states;
  }
  if (layout_.home[x] == Tier::kNvme) {
    s.nvme_write_.Reserve(s.cpu_free_, double(b) / s.nvme_write_.bps);
    if (s.counting_) s.totals_.bytes_nvme_write += b;
  }
  if (s.resident_[x]) {  // the device copy is updated in place
    s.arrival_[x] = std::max(s.arrival_[x], s.h2d_.Reserve(s.cpu_free_, CopySeconds(b, s.h2d_)));
    if (s.counting_) s.totals_.bytes_h2d += b;
  }
}

PolicyResult CacheSimulator::Run(SimPolicy& policy) const {
  SimContext s(*this);
  const int total = config_.warmup_steps + config_.steps;
  AccessIndex g = 0;
  double counted_time = 0;
  // Each lane's busy seconds so far, in StepLane order.
  auto lanes_now = [&s] {
    LaneBusy b;
    b[StepLane::kCompute] = s.compute_busy_;
    b[StepLane::kH2D] = s.h2d_.busy;
    b[StepLane::kD2H] = s.d2h_.busy;
    b[StepLane::kNvmeRead] = s.nvme_read_.busy;
    b[StepLane::kNvmeWrite] = s.nvme_write_.busy;
    b[StepLane::kCollectives] = s.net_.busy;
    b[StepLane::kOptimizer] = s.cpu_busy_;
    return b;
  };
  LaneBusy counted_lanes;
  for (int step = 0; step < total; ++step) {
    s.step_ = step;
    s.pos_ = 0;
    s.counting_ = step >= config_.warmup_steps;
    const double step_start = s.now_;
    const LaneBusy lanes_start = lanes_now();
    policy.BeginStep(s);
    for (size_t i = 0; i < trace_.events.size(); ++i) {
      const TraceEvent& e = trace_.events[i];
      s.pos_ = i;
      if (e.kind == EventKind::kCollective) {
        RunCollective(e, s);
      } else if (e.is_device_access()) {
        RunAccess(e, g++, policy, s);
      } else {
        RunOptimizer(e, policy, s);
      }
    }
    s.pos_ = trace_.events.size();
    for (const Lane* lane : {&s.nvme_read_, &s.nvme_write_, &s.h2d_, &s.d2h_, &s.net_}) {
      s.now_ = std::max(s.now_, lane->free_at);
    }
    s.now_ = std::max(s.now_, s.cpu_free_);
    if (s.counting_) {
      counted_time += s.now_ - step_start;
      const LaneBusy lanes_end = lanes_now();
      for (int l = 0; l < kStepLanes; ++l) counted_lanes.seconds[l] += lanes_end.seconds[l] - lanes_start.seconds[l];
    }
  }
  PolicyResult r = s.totals_;
  const double steps = config_.steps;
  r.policy = policy.name();
  r.accesses = seq_.size();
  const double accesses = steps * double(seq_.size());
  r.device_hit_rate = double(s.hits_) / accesses;
  r.host_hit_rate = double(s.host_served_) / accesses;
  r.bytes_h2d = uint64_t(double(r.bytes_h2d) / steps);
  r.bytes_d2h = uint64_t(double(r.bytes_d2h) / steps);
  r.bytes_nvme_read = uint64_t(double(r.bytes_nvme_read) / steps);
  r.bytes_nvme_write = uint64_t(double(r.bytes_nvme_write) / steps);
  r.stall_s /= steps;
  r.collective_delay_s /= steps;
  r.step_time_s = counted_time / steps;
  for (int l = 0; l < kStepLanes; ++l) r.lanes.seconds[l] = counted_lanes.seconds[l] / steps;
  r.overlap_efficiency = r.lanes.OverlapEfficiency(r.step_time_s);
  return r;
}

}  // namespace tencache
