// CacheSimulator: replays a trace, step after step, against one cache policy and
// predicts hit rates, bytes moved, stalls and step time.
//
// The device caches 16-bit parameter shards; links are FIFO lanes on one
// timeline (NVMe read, NVMe write, host->device, device->host, collectives, the
// host CPU that runs Adam). A policy decides what to evict and what to fetch
// ahead on the device; the host tier below it is the worker's cache as
// HostTierModel describes it (its tensors, slots and next-use victims), which
// decides every NVMe read and write; the engine does the accounting,
// identically for every policy. An access
// is a device hit when its tensor has stayed on the device since the tensor's
// previous access (any fetch since then, demand or prefetch, makes it a miss).
// An update the trace marks as the optimizer lane's runs on that lane's
// timeline beside the training thread (common/optimizer_lane_timeline.h), which waits
// for it only where it retires it.
// The first `warmup_steps` steps (profiling) are simulated but not counted.
// A CacheSimulator is immutable; Run builds fresh state, so concurrent Runs on
// one simulator are safe. A SimContext belongs to one Run.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cachemgr/types.h"
#include "common/link.h"
#include "common/optimizer_lane_timeline.h"
#include "common/status.h"
#include "common/step_lanes.h"
#include "scheduler/access_sequence.h"
#include "scheduler/host_tier_model.h"
#include "scheduler/plan.h"
#include "scheduler/trace.h"

namespace tencache {

struct SimConfig {
  LinkSpeeds links;
  TierBudgets budgets;
  int warmup_steps = 2;  // the profiling step (DeepSpeed records its trace) and one to settle
  int steps = 2;         // steady-state steps that are counted
  // Fixed seconds of every host<->device copy on top of bytes / bandwidth (launch,
  // allocation, synchronisation); it occupies the copy's lane.
  double copy_latency_s = 0;
};

// Per steady-state step averages, except the rates.
struct PolicyResult {
  std::string policy;
  double device_hit_rate = 0;  // hits / device accesses
  double host_hit_rate = 0;    // device misses whose parameter was in host memory / device accesses
  LinkByteCounts bytes;        // per link
  double stall_s = 0;          // compute waiting for tensors and all-gathers
  // The training thread waiting for the optimizer lane to finish an update it
  // retires (0 without optimizer-lane updates); in the step time, not in stall_s.
  double optimizer_wait_s = 0;
  double step_time_s = 0;
  // All-gathers started late because the host->device lane was busy (shared PCIe).
  double collective_delay_s = 0;
  uint64_t accesses = 0;          // device accesses per step
  // Each lane's busy seconds per step, and the busiest one's over the step
  // time (common/step_lanes.h, as the worker reports them).
  LaneBusy lanes;
  double overlap_efficiency = 0;
};

// A link or device that serves one transfer at a time (FIFO): a transfer starts
// when both it is ready and the lane is free. The simulator may ask for a
// transfer after it has placed later ones (an update's state reads, issued
// before the access the update follows but simulated at the update); the
// device served it when it was asked for, so it takes the lane's idle time from
// `ready` on, in as many stretches as it needs, ahead of the later ones.
struct Lane {
  double bps = 1;
  double free_at = 0;  // end of the latest transfer
  double busy = 0;     // seconds reserved so far (transfers never overlap)
  // REQUIRES seconds >= 0. Returns when a transfer of `seconds` asked for at
  // `ready` ends.
  double Reserve(double ready, double seconds);
  // When Reserve(ready, seconds) would end, reserving nothing. REQUIRES seconds >= 0.
  double End(double ready, double seconds) const;
  // A transfer that holds the lane from `start` to `end`. REQUIRES start >= free_at.
  void Occupy(double start, double end);
  // Idle time before `t` is no longer offered to transfers (keeps the lane small).
  void Forget(double t);

 private:
  // Walks the gaps a transfer of `seconds` asked for at `ready` fills, calling
  // fill(start, end) for each, in order; returns its end.
  template <typename Fill>
  double Walk(double ready, double seconds, Fill fill) const;
  std::vector<std::pair<double, double>> spans_;  // busy [start, end), sorted, disjoint
  double floor_ = 0;  // Forget's horizon
};

class CacheSimulator;

// What a policy sees and may do during a Run.
class SimContext {
 public:
  const AccessSequence& seq() const;
  const TierLayout& layout() const;
  int step() const { return step_; }
  int total_steps() const;  // warm-up + counted steps of this Run
  double now() const { return now_; }
  uint64_t capacity() const;
  const LinkSpeeds& links() const;  // the run's link speeds (SimConfig::links)
  uint64_t elem_bytes() const;  // bytes per element of the 16-bit (or fp32) parameters
  uint64_t free_bytes() const { return capacity() - used_; }
  bool resident(TensorId id) const { return resident_[id]; }
  // Whether `id`'s parameter is in (or arriving to) host memory; otherwise it is only on NVMe.
  bool host_resident(TensorId id) const;
  bool in_flight(TensorId id) const { return resident_[id] && arrival_[id] > now_; }
  void Evict(TensorId id);
  // Starts a fetch now from the tensor's home. False (and nothing happens) when
  // the tensor is resident or does not fit in the free bytes. `staged`: a
  // planned fetch whose NVMe read (when the parameter is only on NVMe) the
  // worker started kHostTierLead accesses earlier (HostIssueTime).
  bool Fetch(TensorId id, bool staged = false);
  // When a fetch issued now would finish on the host->device lane (an NVMe
  // read first when the parameter is not in host memory), placed on each lane
  // as Lane::Reserve would place it. The wait for a host victim's slot and
  // write-back is left out: a lower bound when the host tier is full.
  double PredictArrival(TensorId id) const;
  // The release `back` accesses before the latest one (0: the latest access's
  // compute end), where the worker issues host-tier work ahead: an update's
  // states (back 1), a staged parameter (back kHostTierLead).
  // REQUIRES: back <= kHostTierLead.
  double HostIssueTime(int back) const { return access_ends_[size_t(back)]; }
  // The host thread blocks until `id`'s fetch has arrived (a synchronous copy):
  // the current access's compute starts no earlier, and the wait counts as
  // stall. REQUIRES: called from SimPolicy::OnAccess.
  void WaitForArrival(TensorId id);
  int ranks() const;
  // Lower bound on when the next all-gather that occupies the host->device lane
  // starts (compute without stalls until its issue point); +inf when none.
  double NextPcieCollective() const;

 private:
  friend class CacheSimulator;
  explicit SimContext(const CacheSimulator& sim);
  // Brings host tensor `t` into host memory for `mode`, requested at `request`:
  // when it is not resident, the victim HostTierModel names (never `t` or one
  // of held_) leaves once its last use has ended, written back to NVMe first
  // when dirty, and `t` is read into its slot (not for kOverwrite). Returns
  // when `t`'s bytes are there. The caller sets free_at (and dirty) once its
  // use is known to end.
  double HostAcquire(uint32_t t, AccessMode mode, double request);
  // Frees host tensor `t`'s slot without a write-back (a consumed gradient), at time `at`.
  void DropHost(uint32_t t, double at);
  // Copies `id`'s parameter from host memory (HostAcquire'd first, requested at
  // `host_request` <= now) to the device, requested now; returns when it has
  // arrived. Counts bytes[Link::kH2D].
  double CopyToDevice(TensorId id, double host_request);
  Lane& lane(Link link) { return links_[static_cast<int>(link)]; }
  const Lane& lane(Link link) const { return links_[static_cast<int>(link)]; }
  // A copy of `bytes` over `link` asked for at `ready`, placed as Lane::Reserve
  // places it and counted in a counted step; returns when it ends.
  double Copy(Link link, double ready, uint64_t bytes);

  const CacheSimulator& sim_;
  int step_ = 0;
  size_t pos_ = 0;  // trace event whose start is `now_`
  double now_ = 0;
  uint64_t used_ = 0;
  std::vector<bool> resident_;
  std::vector<bool> fresh_;  // fetched since its last access
  std::vector<bool> device_only_;  // the device holds its only current copy (host copy dropped clean)
  std::vector<double> arrival_;
  std::vector<double> grad_ready_;
  std::array<Lane, kNumLinks> links_;  // in Link order
  Lane net_;
  HostTierState host_;
  std::vector<uint32_t> held_;  // host tensors the update in progress holds
  double compute_busy_ = 0, cpu_busy_ = 0;  // seconds the device computed and the CPU ran Adam
  OptimizerLaneTimeline optimizer_lane_;  // the updates the trace runs beside the training thread
  // When the compute of the latest device accesses ended, the latest first:
  // the releases at which the worker issues host-tier work (kHostTierLead).
  static_assert(kHostTierLead >= 1, "the states' issue point, one release back, must be kept");
  std::array<double, kHostTierLead + 1> access_ends_{};
  std::map<int, double> gather_end_;  // block -> pending all-gather's end
  bool counting_ = false;
  PolicyResult totals_;
  uint64_t hits_ = 0, host_served_ = 0;
};

class SimPolicy {
 public:
  virtual ~SimPolicy() = default;
  virtual const char* name() const = 0;
  virtual void BeginStep(SimContext& s) {}
  // Before access g is resolved: issue prefetches.
  virtual void BeforeAccess(DeviceAccessIndex g, SimContext& s) {}
  // Access g misses and its tensor is not resident: evict until it fits.
  virtual void MakeRoom(TensorId id, DeviceAccessIndex g, SimContext& s) = 0;
  // The tensor of access g is on (or arriving to) the device; compute follows.
  virtual void OnAccess(DeviceAccessIndex g, SimContext& s) {}
  // Compute of access g finished.
  virtual void AfterAccess(DeviceAccessIndex g, SimContext& s) {}
  // Whether it reads each update's NVMe-resident optimizer states ahead (as
  // tencache's worker does): the read may then start when the access before
  // the one the update follows has ended, instead of at the update. Either way it starts
  // no earlier than its victim's slot is free and written back (TensorCache's
  // host-tier rule, SimContext::HostAcquire).
  virtual bool PrefetchesStates() const { return false; }
};

class CacheSimulator {
 public:
  static StatusOr<CacheSimulator> Create(const Trace& trace, const SimConfig& config);
  PolicyResult Run(SimPolicy& policy) const;

  const AccessSequence& sequence() const { return seq_; }
  const TierLayout& layout() const { return layout_; }
  const HostTierModel& host() const { return host_; }
  const SimConfig& config() const { return config_; }
  const Trace& trace() const { return trace_; }

 private:
  friend class SimContext;
  void RunAccess(const TraceEvent& e, DeviceAccessIndex g, SimPolicy& policy, SimContext& s) const;
  void RunCollective(const TraceEvent& e, SimContext& s) const;
  void RunOptimizer(const TraceEvent& e, const SimPolicy& policy, SimContext& s) const;
  // The training thread retires the optimizer lane's update in flight: it
  // waits for its end (optimizer_wait_s).
  void RetireUpdate(SimContext& s) const;
  // The step protocol's events after trace event `event`'s AccessEnd: gradient
  // stores (the training thread waits for their slots) and held-row writes.
  void RunAfterEnd(size_t event, SimContext& s) const;
  // Seconds a copy of `bytes` holds `link`'s lane (at `bps`): host<->device
  // copies pay config_.copy_latency_s on top.
  double CopySeconds(Link link, uint64_t bytes, double bps) const;

  Trace trace_;
  SimConfig config_;
  AccessSequence seq_;
  TierLayout layout_;
  HostTierModel host_;
  DType dtype_ = DType::kBf16;  // the trace's (TraceDType)
  uint64_t elem_bytes_ = 2;     // of its parameter shards
  std::vector<double> compute_before_;  // per event: device compute before it in the step
  std::vector<size_t> next_gather_;     // per event: index of the next all-gather, or size
};

}  // namespace tencache
