#include "scheduler/sim_engine.h"

#include <algorithm>
#include <string>

#include "common/shard_bytes.h"

namespace tencache {

template <typename Fill>
double Lane::Walk(double ready, double seconds, Fill fill) const {
  double t = std::max(ready, floor_);
  double left = seconds;
  // The first span that ends after t; the transfer fills the gaps from t on.
  auto it = std::upper_bound(spans_.begin(), spans_.end(), t,
                             [](double v, const std::pair<double, double>& span) { return v < span.second; });
  for (; left > 0 && it != spans_.end(); ++it) {
    if (it->first > t) {
      const double used = std::min(it->first - t, left);
      fill(t, t + used);
      t += used;
      left -= used;
      if (left <= 0) return t;
    }
    t = std::max(t, it->second);
  }
  if (left > 0) {
    fill(t, t + left);
    t += left;
  }
  return t;
}

double Lane::End(double ready, double seconds) const {
  return Walk(ready, seconds, [](double, double) {});
}

double Lane::Reserve(double ready, double seconds) {
  busy += seconds;
  std::vector<std::pair<double, double>> fills;
  const double t = Walk(ready, seconds, [&fills](double a, double b) { fills.emplace_back(a, b); });
  for (const auto& f : fills) {
    spans_.insert(std::upper_bound(spans_.begin(), spans_.end(), f), f);
  }
  free_at = std::max(free_at, t);
  // Merge spans that now touch, so the list holds only true gaps.
  size_t out = 0;
  for (size_t i = 1; i < spans_.size(); ++i) {
    if (spans_[i].first <= spans_[out].second) {
      spans_[out].second = std::max(spans_[out].second, spans_[i].second);
    } else {
      spans_[++out] = spans_[i];
    }
  }
  if (!spans_.empty()) spans_.resize(out + 1);
  return t;
}

void Lane::Occupy(double start, double end) {
  busy += end - start;
  if (!spans_.empty() && spans_.back().second >= start) {
    spans_.back().second = std::max(spans_.back().second, end);
  } else {
    spans_.emplace_back(start, end);
  }
  free_at = std::max(free_at, end);
}

void Lane::Forget(double t) {
  floor_ = std::max(floor_, t);
  auto it = std::upper_bound(spans_.begin(), spans_.end(), floor_,
                             [](double v, const std::pair<double, double>& span) { return v < span.second; });
  spans_.erase(spans_.begin(), it);
}

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

SimContext::SimContext(const CacheSimulator& sim) : sim_(sim) {
  const size_t n = sim.seq_.num_tensors();
  resident_.assign(n, false);
  fresh_.assign(n, false);
  device_only_.assign(n, false);
  arrival_.assign(n, 0);
  grad_ready_.assign(n, 0);
  const size_t h = sim.host_.num_tensors();
  host_.resident.assign(h, false);
  host_.dirty.assign(h, false);
  host_.ready_at.assign(h, 0);
  host_.free_at.assign(h, 0);
  host_.used.assign(sim.host_.num_classes(), 0);
  const LinkSpeeds& l = sim.config_.links;
  for (Link link : kLinks) lane(link).bps = l.Bps(link);
  net_.bps = l.collective_bps;
}

const AccessSequence& SimContext::seq() const { return sim_.seq_; }
const TierLayout& SimContext::layout() const { return sim_.layout_; }
uint64_t SimContext::capacity() const { return sim_.layout_.device_capacity; }
const LinkSpeeds& SimContext::links() const { return sim_.config_.links; }
int SimContext::total_steps() const {
  return sim_.config_.warmup_steps + sim_.config_.steps;
}
uint64_t SimContext::elem_bytes() const { return sim_.elem_bytes_; }
bool SimContext::host_resident(TensorId id) const { return host_.resident[sim_.host_.param(id)]; }

void SimContext::Evict(TensorId id) {
  if (!resident_[id]) return;
  resident_[id] = false;
  used_ -= sim_.seq_.bytes(id);
  if (!device_only_[id]) return;  // the host (or NVMe) copy is current
  // Its host copy was dropped after an update while the device held the only
  // current one: the cache writes it back to a host slot.
  device_only_[id] = false;
  const uint32_t t = sim_.host_.param(id);
  const double copied = Copy(Link::kD2H, now_, sim_.seq_.bytes(id));
  host_.free_at[t] = std::max(HostAcquire(t, AccessMode::kOverwrite, now_), copied);
  host_.dirty[t] = true;
}

double SimContext::PredictArrival(TensorId id) const {
  const uint64_t b = sim_.seq_.bytes(id);
  const uint32_t t = sim_.host_.param(id);
  const Lane& read = lane(Link::kNvmeRead);
  const double ready = host_.resident[t] ? std::max(now_, host_.ready_at[t])
                                         : read.End(now_, sim_.CopySeconds(Link::kNvmeRead, b, read.bps));
  return lane(Link::kH2D).End(ready, sim_.CopySeconds(Link::kH2D, b, lane(Link::kH2D).bps));
}

double SimContext::Copy(Link link, double ready, uint64_t bytes) {
  Lane& l = lane(link);
  const double end = l.Reserve(ready, sim_.CopySeconds(link, bytes, l.bps));
  if (counting_) totals_.bytes[link] += bytes;
  return end;
}

double SimContext::HostAcquire(uint32_t t, AccessMode mode, double request) {
  const HostTierModel& m = sim_.host_;
  if (host_.resident[t]) return std::max(request, host_.ready_at[t]);
  const int c = m.size_class(t);
  double slot = request;
  if (host_.used[c] >= m.slots(c)) {
    int64_t victim = -1;
    AcquireIndex furthest;
    for (uint32_t v : m.members(c)) {
      if (!host_.resident[v] || std::find(held_.begin(), held_.end(), v) != held_.end()) continue;
      const AcquireIndex next = m.NextUse(v, AcquireIndex(host_.pos));
      if (victim < 0 || next > furthest) victim = v, furthest = next;
    }
    // With at least kWorkerHostSlotsPerClass slots a class always has one
    // unheld; were none, the tensor would take a slot beyond the plan.
    if (victim >= 0) {
      const uint32_t v = uint32_t(victim);
      host_.resident[v] = false;
      --host_.used[c];
      slot = std::max(request, host_.free_at[v]);  // parked until its last use has ended
      if (host_.dirty[v] && v < m.num_params() && resident_[v]) {
        device_only_[v] = true;  // the device's copy is current (refreshed by the update): nothing to write
      } else if (host_.dirty[v]) {
        slot = Copy(Link::kNvmeWrite, slot, m.bytes(v));
      }
      host_.dirty[v] = false;
    }
  }
  ++host_.used[c];
  host_.resident[t] = true;
  double ready = slot;
  const bool from_device = t < m.num_params() && device_only_[t];
  if (from_device) device_only_[t] = false;
  if (mode != AccessMode::kOverwrite && from_device) {  // the device holds the current copy
    ready = Copy(Link::kD2H, slot, m.bytes(t));
  } else if (mode != AccessMode::kOverwrite) {
    ready = Copy(Link::kNvmeRead, slot, m.bytes(t));
  }
  host_.ready_at[t] = host_.free_at[t] = ready;
  return ready;
}

// The slot is free at once for the count of its class: a later acquire may take it before `at`.
void SimContext::DropHost(uint32_t t, double at) {
  if (!host_.resident[t]) return;
  host_.resident[t] = false;
  host_.dirty[t] = false;
  host_.free_at[t] = std::max(host_.free_at[t], at);
  --host_.used[sim_.host_.size_class(t)];
}

double SimContext::CopyToDevice(TensorId id, double host_request) {
  const uint64_t b = sim_.seq_.bytes(id);
  const uint32_t t = sim_.host_.param(id);
  const double ready = std::max(now_, HostAcquire(t, AccessMode::kRead, host_request));
  const double end = Copy(Link::kH2D, ready, b);
  host_.free_at[t] = std::max(host_.free_at[t], end);  // the host copy is in use until then
  return end;
}

bool SimContext::Fetch(TensorId id, bool staged) {
  const uint64_t b = sim_.seq_.bytes(id);
  if (resident_[id] || b > free_bytes()) return false;
  arrival_[id] = CopyToDevice(id, staged ? std::min(now_, HostIssueTime(kHostTierLead)) : now_);
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
  TC_ASSIGN_OR_RETURN(sim.host_, HostTierModel::Create(trace, config.budgets.host));
  sim.dtype_ = TraceDType(trace);
  sim.elem_bytes_ = StateElementBytes(sim.dtype_, kStateParam);
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

double CacheSimulator::CopySeconds(Link link, uint64_t bytes, double bps) const {
  if (link == Link::kNvmeRead || link == Link::kNvmeWrite) return double(bytes) / bps;
  return config_.copy_latency_s + double(bytes) / bps;
}

void CacheSimulator::RunAccess(const TraceEvent& e, DeviceAccessIndex g, SimPolicy& policy,
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
  const bool host_served = !hit && s.host_.resident[host_.param(x)];
  double ready = s.now_;
  if (s.resident_[x]) {
    ready = s.arrival_[x];
  } else {
    if (seq_.bytes(x) <= layout_.device_capacity) policy.MakeRoom(x, g, s);
    ready = s.Fetch(x) ? s.arrival_[x] : s.CopyToDevice(x, s.now_);  // streamed when it does not fit
  }
  if (s.counting_) {
    s.hits_ += hit;
    s.host_served_ += host_served;
  }
  wait_until(ready);
  s.fresh_[x] = false;
  policy.OnAccess(g, s);
  s.now_ += e.duration_s();
  RetireUpdate(s);  // before the access ends
  std::copy_backward(s.access_ends_.begin(), s.access_ends_.end() - 1, s.access_ends_.end());
  s.access_ends_[0] = s.now_;
  s.compute_busy_ += e.duration_s();
  if (e.phase == Phase::kBackward) {  // the fp32 gradient shard goes to the host (after the reduce-scatter)
    s.grad_ready_[x] = s.Copy(Link::kD2H, s.now_, GradShardBytes(e.bytes, dtype_));
  }
  ++s.host_.pos;  // the access acquired its parameter (the step protocol's first event of it)
  RunAfterEnd(s.pos_, s);
  ++s.pos_;
  policy.AfterAccess(g, s);
}

// The stream's events after trace event `event`'s end. A gradient stored for
// a later contribution (micro-batch, deferred update, or the tied head's):
// the training thread waits for its host pieces' slots (and reads, when it
// adds into pieces that were evicted); the add lands once the gradient has
// arrived. A split update's write of its held rows: a position in the order
// (a few rows: their bytes are not modelled).
void CacheSimulator::RunAfterEnd(size_t event, SimContext& s) const {
  const HostStepEvent* h = host_.events_begin(event);
  const HostStepEvent* const end = host_.events_end(event);
  while (h != end && h->event.kind != StepEventKind::kAccessEnd) ++h;
  for (; h != end; ++h) {
    if (h->event.kind != StepEventKind::kAcquire) continue;
    if (h->event.state == kStateGrad) {
      const uint32_t t = h->tensor;
      const double ready = s.HostAcquire(t, h->event.mode, s.now_);
      if (ready > s.now_) {
        if (s.counting_) s.totals_.stall_s += ready - s.now_;
        s.now_ = ready;
      }
      s.host_.dirty[t] = true;
      s.host_.free_at[t] = std::max({s.host_.free_at[t], s.now_, s.grad_ready_[TensorId(h->event.block)]});
    }
    ++s.host_.pos;
  }
}

void CacheSimulator::RunCollective(const TraceEvent& e, SimContext& s) const {
  Lane* pcie = nullptr;
  if (config_.links.collectives_share_pcie) {
    pcie = &s.lane(e.collective == CollectiveKind::kAllGather ? Link::kH2D : Link::kD2H);
  }
  const double unloaded = std::max(s.now_, s.net_.free_at);
  const double start = pcie ? std::max(unloaded, pcie->free_at) : unloaded;
  if (s.counting_ && e.collective == CollectiveKind::kAllGather) {
    s.totals_.collective_delay_s += start - unloaded;
  }
  const double end = start + double(e.bytes) / s.net_.bps;
  s.net_.Occupy(start, end);
  if (pcie) pcie->Occupy(start, end);
  if (e.collective == CollectiveKind::kAllGather) s.gather_end_[e.block] = end;
}

// The update of one tensor's shard, piece by piece, as the worker runs it
// (the step protocol's update, scheduler/step_protocol.h): each piece's states are acquired in host memory —
// read ahead, when the policy prefetches them, from the end of the access
// before the one the update follows (where the worker issues them) — then the
// CPU updates that piece and releases them, dirty.
// The parameter is held from its acquire to the end: in fp32 it is the master,
// read first; in mixed precision it is overwritten once the first piece is
// updated, the CPU waiting for its slot. The CPU time is shared evenly by the pieces.
// The training thread runs the update, as the worker's does (inside the
// backward, or after it): it goes on once the update is done. The update's
// waits for its states count as stall; the wait for its gradient's copy to the
// host does not (the worker's stall is its waits for the cache).
// An optimizer lane's update: the training thread reads the stored gradient
// (its waits are stall), retires the update in flight and issues this one;
// the lane runs the rest from then (after its lead), waiting for the
// gradient's copy and its states on its own timeline, and the training thread
// goes on at once. Every acquire is asked for when it would be on the
// training thread: only the timeline that waits for it differs.
void CacheSimulator::RunOptimizer(const TraceEvent& e, const SimPolicy& policy, SimContext& s) const {
  const TensorId x = e.id;
  const uint64_t b = e.bytes;
  const uint32_t param = host_.param(x);
  const bool lane = e.optimizer_lane;
  if (!lane) RetireUpdate(s);  // an update of the training thread's own is the next update's issue
  // Issued at the release of the access before the one the update follows (the latest).
  const double issue = policy.PrefetchesStates() ? std::min(s.now_, s.HostIssueTime(1)) : s.now_;
  // The training thread, running the update (the lane's: reading its stored gradient).
  double cpu = lane ? s.now_ : std::max(s.now_, s.grad_ready_[x]);
  bool stall = true;  // the training thread waits (not the lane)
  auto wait_until = [&](double t) {
    if (t <= cpu) return;
    if (s.counting_ && stall) s.totals_.stall_s += t - cpu;
    cpu = t;
  };
  // The pieces this access updates (a part of a streamed update, or all).
  const int first = e.pieces_end > 0 ? std::min(e.pieces_begin, host_.pieces(x)) : 0;
  const int last = e.pieces_end > 0 ? std::min(e.pieces_end, host_.pieces(x)) : host_.pieces(x);
  const double piece_s = e.duration_s() / std::max(1, last - first);
  // The update's events in the step's stream, up to its AccessEnd.
  const HostStepEvent* h = host_.events_begin(s.pos_);
  const HostStepEvent* const end = host_.events_end(s.pos_);
  s.held_.clear();
  // A stored gradient: read, added into the reduced one, dropped (by the part that has it).
  std::vector<uint32_t> consumed;
  for (; h != end && h->event.kind != StepEventKind::kAccessEnd && h->event.state == kStateGrad; ++h) {
    if (h->event.kind == StepEventKind::kInvalidate) {
      consumed.push_back(h->tensor);
      continue;
    }
    wait_until(s.HostAcquire(h->tensor, h->event.mode, issue));
    ++s.host_.pos;
  }
  for (uint32_t t : consumed) s.DropHost(t, cpu);
  if (lane) {  // the issue: the lane starts the update, the training thread goes on
    s.now_ = cpu;
    RetireUpdate(s);
    const double start = s.optimizer_lane_.Issue(s.now_);
    cpu = std::max(start + e.lead_s, s.grad_ready_[x]);
    stall = false;
  }
  // Piece by piece: its states acquired (read ahead from `issue`), held while
  // the CPU updates it, then released dirty. The parameter: fp32, acquired
  // first and held throughout; mixed precision, acquired once the part's
  // first piece is updated (the CPU waits for its slot) and held from then on.
  bool computing = false;  // the current piece's states are acquired, its update not yet run
  double ready = cpu;
  int piece = -1;
  auto compute = [&] {
    if (!computing) return;
    wait_until(ready);
    cpu += piece_s;
    computing = false;
  };
  auto release = [&] {  // the piece's states, dirty; the parameter stays held
    for (uint32_t t : s.held_) {
      s.host_.dirty[t] = true;
      s.host_.free_at[t] = std::max(s.host_.free_at[t], cpu);
    }
    s.held_.erase(std::remove_if(s.held_.begin(), s.held_.end(), [param](uint32_t t) { return t != param; }),
                  s.held_.end());
  };
  for (; h != end && h->event.kind == StepEventKind::kAcquire; ++h) {
    const StepEvent& ev = h->event;
    if (ev.state == kStateParam && host_.shape().mixed) {
      compute();
      wait_until(s.HostAcquire(param, ev.mode, cpu));
      s.host_.dirty[param] = true;
      s.held_.push_back(param);
      ++s.host_.pos;
      release();
      continue;
    }
    if (ev.state != kStateParam && ev.piece != piece) {
      compute();
      release();
      piece = ev.piece;
    }
    ready = std::max(ready, s.HostAcquire(h->tensor, ev.mode, issue));
    s.held_.push_back(h->tensor);
    ++s.host_.pos;
    computing = computing || ev.state != kStateParam;
  }
  compute();
  release();
  for (uint32_t t : s.held_) s.host_.free_at[t] = std::max(s.host_.free_at[t], cpu);  // the parameter
  s.held_.clear();
  s.cpu_busy_ += e.duration_s();
  if (lane) {
    s.optimizer_lane_.Finish(cpu);
  } else {
    s.now_ = cpu;
  }
  if (s.resident_[x] && last == host_.pieces(x)) {  // the device copy is updated in place
    s.arrival_[x] = std::max(s.arrival_[x], s.Copy(Link::kH2D, cpu, b));
  }
  RunAfterEnd(s.pos_, s);  // a tied embedding's contribution reduced after the head's update
}

void CacheSimulator::RetireUpdate(SimContext& s) const {
  const double t = s.optimizer_lane_.Retire(s.now_);
  if (s.counting_) s.totals_.optimizer_wait_s += t - s.now_;
  s.now_ = t;
}

PolicyResult CacheSimulator::Run(SimPolicy& policy) const {
  SimContext s(*this);
  const int total = config_.warmup_steps + config_.steps;
  DeviceAccessIndex g;
  double counted_time = 0;
  // Each lane's busy seconds so far, in StepLane order.
  auto lanes_now = [&s] {
    LaneBusy b;
    b[StepLane::kCompute] = s.compute_busy_;
    for (Link l : kLinks) b[LaneOf(l)] = s.lane(l).busy;
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
    for (Lane& lane : s.links_) lane.Forget(step_start);
    s.net_.Forget(step_start);
    const LaneBusy lanes_start = lanes_now();
    policy.BeginStep(s);
    for (size_t i = 0; i < trace_.events.size(); ++i) {
      const TraceEvent& e = trace_.events[i];
      s.pos_ = i;
      // The training thread's own work before it asks (a lane's update: the lane's, after its issue).
      if (e.kind == EventKind::kAccess && !e.optimizer_lane) s.now_ += e.lead_s;
      if (e.kind == EventKind::kCollective) {
        RunCollective(e, s);
      } else if (e.is_device_access()) {
        RunAccess(e, g++, policy, s);
      } else {
        RunOptimizer(e, policy, s);
      }
    }
    s.pos_ = trace_.events.size();
    RetireUpdate(s);
    for (const Lane& lane : s.links_) s.now_ = std::max(s.now_, lane.free_at);
    s.now_ = std::max(s.now_, s.net_.free_at);
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
  for (Link l : kLinks) r.bytes[l] = uint64_t(double(r.bytes[l]) / steps);
  r.stall_s /= steps;
  r.optimizer_wait_s /= steps;
  r.collective_delay_s /= steps;
  r.step_time_s = counted_time / steps;
  for (int l = 0; l < kStepLanes; ++l) r.lanes.seconds[l] = counted_lanes.seconds[l] / steps;
  r.overlap_efficiency = r.lanes.OverlapEfficiency(r.step_time_s);
  return r;
}

}  // namespace tencache
