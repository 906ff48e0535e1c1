// PrefetchPlan: what the profiled order says the cache should do in every
// steady-state step — which tensors stay in which tier, which device victims
// leave and which fetch to issue at which device access (DeviceAccessIndex).
//
// Residency follows Belady: on a miss, evict the resident tensors whose next use
// is furthest away; a tensor re-used soon therefore stays on the device. The plan
// then moves each fetch as early as the space allows: a fetch may be issued as
// soon as every tensor it evicts has had its last use before the fetched
// tensor's use. Issued in order, the device never holds more than the Belady
// resident set right after the latest issued fetch, so no tier budget is
// exceeded and the hit set is exactly Belady's. Immutable after Build; every
// query is safe from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "cachemgr/types.h"
#include "common/shard_bytes.h"
#include "common/status.h"
#include "scheduler/access_sequence.h"
#include "scheduler/trace.h"

namespace tencache {

// Bytes per second of each lane of the timeline.
struct LinkSpeeds {
  double nvme_read_bps = 3.0e9;    // NVMe -> host
  double nvme_write_bps = 2.0e9;   // host -> NVMe
  double h2d_bps = 25e9;           // host -> device (PCIe Gen4 x16, pinned)
  double d2h_bps = 25e9;           // device -> host
  double collective_bps = 12.5e9;  // network, per rank (100 Gb/s)
  // Collectives land in / leave from device memory over the same PCIe link as
  // host copies (GPUDirect RDMA), so they also occupy the h2d / d2h lane.
  bool collectives_share_pcie = true;

  // The field above that holds `link`'s speed.
  double& Bps(Link link) { return const_cast<double&>(static_cast<const LinkSpeeds&>(*this).Bps(link)); }
  const double& Bps(Link link) const {
    switch (link) {
      case Link::kH2D: return h2d_bps;
      case Link::kD2H: return d2h_bps;
      case Link::kNvmeRead: return nvme_read_bps;
      case Link::kNvmeWrite: return nvme_write_bps;
    }
    return h2d_bps;
  }
};
Status ValidateLinkSpeeds(const LinkSpeeds& links);

struct TierBudgets {
  uint64_t device = 0;
  uint64_t host = 0;
  uint64_t nvme = 0;  // 0: unlimited
};

// The dtype of a trace's tensors: its header's "fp32" or "fp16", else bf16.
DType TraceDType(const Trace& trace);

// HostPlacement: the host tier's placement of one rank's shards for a host
// budget — which bytes the host keeps and which live on NVMe. The host keeps,
// in this order: a staging reserve of two of the largest parameter shards,
// gradient shards in block order while the next fits, parameter shards in
// block order while the next fits, then each block's optimizer states
// ([master,] m, v, one unit) where they fit; the rest goes to NVMe. Bytes per element are
// common/shard_bytes.h's table. The planner (launcher/resource_model.h
// PlaceStates) fills the host in the same order by class fractions; see there.
struct HostPlacement {
  std::vector<Tier> home;            // the parameter shard's, per tensor: kHost or kNvme
  std::vector<bool> states_on_nvme;  // the optimizer states', per tensor
  std::array<uint64_t, kNumStateClasses> host{}, nvme{};  // bytes of each state class
  uint64_t staging = 0;              // host bytes of the staging reserve
  uint64_t host_used() const;        // staging and every class's host bytes
  uint64_t nvme_used() const;
};
// `param_bytes`: each tensor's parameter shard in `dtype`.
HostPlacement PlaceOnHost(const std::vector<uint64_t>& param_bytes, DType dtype, uint64_t host_budget);

// Where each tensor's parameter shard ("home") and optimizer states live
// (PlaceOnHost), and the device budget that caches parameters. Gradients never
// take device budget: the worker's land in working buffers outside it.
struct TierLayout {
  uint64_t device_capacity = 0;   // the device budget: parameter shards only
  std::vector<Tier> home;         // kHost or kNvme, per tensor
  std::vector<bool> states_on_nvme;  // [fp32 master +] Adam moments, per tensor
  uint64_t host_used = 0;
  uint64_t nvme_used = 0;
};
// The least host budget the worker's cache accepts for one rank whose cache
// tensors are `cache_tensor_bytes` (common/shard_bytes.h ShardTensorBytes's
// `all`; HostTierModel registers a trace's the same way): its host tier keeps
// kWorkerHostSlotsPerClass slots of every size (cachemgr MinimumSlotBytes).
// The one floor of the launcher (LeastHostBudget of a model), the simulator
// (HostTierModel::LeastBudget, LayoutTiers) and the worker's cache.
uint64_t LeastHostBudget(const std::vector<uint64_t>& cache_tensor_bytes);
// The trace's tensors placed by PlaceOnHost. ResourceExhausted when a budget
// cannot hold its share: a host budget below HostTierModel::LeastBudget, an
// NVMe budget below what spills, a device budget of 0.
StatusOr<TierLayout> LayoutTiers(const Trace& trace, const AccessSequence& seq,
                                 const TierBudgets& budgets);

// One fetch of the Belady schedule. Indices are global (see AccessSequence).
struct ScheduledFetch {
  DeviceAccessIndex use;             // the access it serves
  DeviceAccessIndex earliest_issue;  // may be issued once accesses < this are done
  TensorId tensor = 0;
  bool streamed = false;           // larger than the device capacity: never cached
  std::vector<TensorId> evict;     // evicted when the fetch is issued
};

struct ResidencySchedule {
  std::vector<ScheduledFetch> fetches;  // ascending `use`
  uint64_t accesses = 0;
  uint64_t hits = 0;
  std::vector<TensorId> final_resident;
};

// Belady (furthest next use) over global accesses [begin, end), starting with
// `resident` on a device of `capacity` bytes. O(accesses · log tensors).
ResidencySchedule BuildBeladySchedule(const AccessSequence& seq, uint64_t capacity,
                                      const std::vector<TensorId>& resident, DeviceAccessIndex begin,
                                      DeviceAccessIndex end);

// The bytes of a `device_capacity`-byte device that tencache's Belady schedule
// fills: the capacity less a staging reserve kept free so that fetches need
// not wait for a victim's last use. The reserve is the one of {0, 1, 2, 4 x the
// largest tensor, capacity / 8, capacity / 4} (below the capacity) whose
// steady-step schedule has the least predicted stall (the plan's
// predicted_stall_s); a tie keeps the smaller reserve. `home`: each
// tensor's home tier (TierLayout::home). Shared by PrefetchPlan (the worker)
// and the simulator's tencache policy. Guarantees 0 < result <= device_capacity
// when device_capacity > 0.
uint64_t ScheduledCapacity(const AccessSequence& seq, const std::vector<Tier>& home, const LinkSpeeds& links,
                           uint64_t device_capacity);

// A steady-state fetch, relative to the start of its step.
struct PlannedFetch {
  TensorId tensor = 0;
  DeviceAccessIndex use;       // access within the step, 0..N-1
  int64_t issue_before = 0;    // issue before this access; negative: in the previous step
  std::vector<TensorId> evict;
  Tier source = Tier::kHost;
  bool streamed = false;
  double issue_s = 0;          // from the step start, on a timeline where compute waits for late fetches
  double arrival_s = 0;
  double need_s = 0;
  int64_t lookahead() const { return int64_t(use.value()) - issue_before; }
};

// An optimizer update whose host-tier shards (fp32 master, moments, a stored
// gradient) are read ahead of it: pieces [pieces_begin, pieces_end) of
// `block`'s update (pieces_end 0: all of them).
struct PlannedStateFetch {
  int block = 0;
  int pieces_begin = 0, pieces_end = 0;
};

class PrefetchPlan {
 public:
  static StatusOr<PrefetchPlan> Build(const Trace& trace, const LinkSpeeds& links,
                                      const TierBudgets& budgets);

  // The device accesses it plans for: next and previous use over them.
  const AccessSequence& sequence() const { return seq_; }
  const TierLayout& layout() const { return layout_; }
  // Ordered by issue point.
  const std::vector<PlannedFetch>& fetches() const { return fetches_; }
  // Fetches to issue right before access k (0 <= k < N) of a step. A fetch whose
  // issue point lies in the previous step (issue_before < 0) is listed under
  // access issue_before + N: issue it then, for the next step's use.
  std::vector<const PlannedFetch*> FetchesBefore(DeviceAccessIndex k) const;
  // The updates whose states to fetch to the host with the fetches before
  // access k (0 <= k < N; empty past the step's end): each update the profile
  // runs after access k, in the profile's order. Issued with the device
  // fetches, as access k-1 is released, the read overlaps the rest of access k.
  const std::vector<PlannedStateFetch>& StateFetchesBefore(DeviceAccessIndex k) const;
  // kDevice when the tensor stays on the device the whole step; else its home.
  Tier ResidentTier(TensorId id) const { return resident_tier_[id]; }
  // Whether the plan keeps `id` on the device until its first access after
  // access k (k at or after its latest access): that access is a hit, no fetch.
  // A worker whose optimizer update invalidates the device copy in between
  // copies it back only then: otherwise the plan fetches it before its use.
  bool KeptUntilNextUse(TensorId id, DeviceAccessIndex k) const;
  double device_hit_rate() const { return hit_rate_; }
  // The device bytes the plan's schedule fills (ScheduledCapacity).
  uint64_t scheduled_capacity() const { return scheduled_capacity_; }
  // The steady step's total wait for late fetches on a timeline where compute
  // waits for them (profiled compute, FIFO NVMe-read and host->device lanes).
  double predicted_stall_s() const { return predicted_stall_s_; }

 private:
  AccessSequence seq_;
  TierLayout layout_;
  std::vector<PlannedFetch> fetches_;
  std::vector<std::vector<uint32_t>> by_issue_;  // per access k: indices into fetches_
  std::vector<std::vector<PlannedStateFetch>> state_fetches_;  // per access k
  std::vector<bool> fetched_;                    // per access k: a planned fetch serves it
  std::vector<Tier> resident_tier_;
  double hit_rate_ = 0;
  uint64_t scheduled_capacity_ = 0;
  double predicted_stall_s_ = 0;
};

}  // namespace tencache
