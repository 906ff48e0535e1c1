// TensorCache: the registry of managed tensors and the only way to reach their
// bytes. Every tensor has an id, a name, a byte size, a dtype and a home tier;
// its copies live in size-class slots of the device and host tiers and in an
// extent of the NVMe file, assigned on its first write-back within the NVMe
// budget (a tensor never written to NVMe takes no NVMe space). As with LevelDB's Cache, Acquire() returns a
// handle that pins the tensor in one tier until it is released; a tensor with a
// live handle in a tier is never evicted from it.
//
// Movement: Prefetch(id, tier) starts moving a tensor toward a tier on a mover
// thread and returns a PrefetchHandle; Acquire(id, tier) returns at once on a
// hit and otherwise waits (up to its timeout) for the move, adding the wait to
// the step's stall seconds. Paths run through the host tier: NVMe -> host ->
// device and back. Copies are inclusive (a tensor may be valid in several tiers);
// acquiring for write makes the acquired copy the only valid one (dirty), and an
// evicted dirty copy is written back to the tier below before its slot is reused.
// Eviction takes, within the needed size class, the unpinned resident tensor
// whose next use (NextUseOracle) is furthest away, or the least recently used
// when no oracle is set. A prefetch (a move nobody waits on yet) takes the
// victim a demand miss at the prefetched tensor's use would take: with an
// oracle set and no free slot in its class, the resident tensor whose first use
// after that use is furthest away (a tensor used fewer than
// min_<tier>_slots_per_class accesses before that use counts as still pinned
// then, as a caller pinning that many acquires them in a row, and is passed
// over). While that tensor still has a use before
// then, or a handle pins it, or a mover copies it, the prefetch is parked
// (counted once in prefetches_deferred) until a handle on it is released, its
// copy leaves the tier or its move ends; so prefetching moves no bytes that
// demand fetches in the same order would not. It never evicts a tensor whose
// next use comes before the prefetched tensor's; when the oracle places no
// candidate after that use it is declined (its handle completes with
// ResourceExhausted, counted in prefetches_declined) and the tensor comes on
// demand instead. An Acquire of a parked prefetch's tensor makes it a demand
// move at once. Never-written tensors read as zeros
// and are never written back (a copy of zeros is dropped, not saved).
//
// NVMe budget: a write-back that needs a new extent beyond nvme_budget fails
// with ResourceExhausted naming the tensor, the budget's key, the budget and the
// bytes used and needed; it reaches the Acquire / Prefetch / Discard that caused
// it, and the dirty copy stays valid where it was. Eviction prefers victims whose
// write-back fits. Budget 0: no NVMe file, and Create requires the host slots to
// hold every tensor (InvalidArgument naming both budgets' keys otherwise).
//
// Errors from tiers (EIO, ENOSPC, short I/O, checksum mismatch, timeouts) reach
// the caller of Acquire / PrefetchHandle::Wait as a Status naming the tensor and
// the file; the failed copy is never marked valid. A copy that times out may
// still be running (the kernel reading its source, or landing in its
// destination later): the tensor keeps both slots and stays busy until it ends,
// so neither slot is reused and no newer copy of it can be overtaken by it; the
// next Acquire of it waits for the end (an NVMe copy) or fails with
// Unavailable (a device copy, whose end cannot be seen).
//
// Handles and movers (the rules that keep copies free of data races):
//  1. A copy pinned for kWrite is being modified: no mover reads it (no move,
//     prefetch or write-back uses it as a source) and it is never evicted. A
//     move that needs it is parked and requeued when a handle on the tensor is
//     released, so it carries the bytes as of the release. Acquiring another
//     tier of that tensor therefore waits for the writer's Release (a thread that
//     holds a kWrite handle and acquires the same tensor in another tier gets
//     Timeout).
//  2. A mover never writes into a slot any handle pins. Only a stale copy can
//     be pinned and invalid (a reader's copy after someone else acquired for
//     write); moves into it are parked until the reader releases, and eviction
//     skips a dirty device copy whose write-back would land there.
//  3. While a mover copies to or from a tensor (it is "busy"), Acquire of any
//     tier of it waits until the copy ends: a writer cannot start modifying a
//     copy that is being read, and a reader never sees a copy being filled.
// Handles among themselves are not ordered: a reader and a writer of the same
// copy share its bytes, as with any shared buffer.
//
// Thread safety: all methods are thread-safe. One mutex guards the registry and
// the pools; copies run outside it on mover threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cachemgr/completion.h"
#include "cachemgr/metrics.h"
#include "cachemgr/nvme_extents.h"
#include "cachemgr/nvme_tier.h"
#include "cachemgr/size_class_pool.h"
#include "cachemgr/tier.h"
#include "cachemgr/types.h"

namespace tencache {

enum class ElementType : uint8_t { kFloat32, kFloat16, kBFloat16, kInt32, kInt64, kUInt8 };
const char* ElementTypeName(ElementType dtype);

struct TensorSpec {
  TensorId id = 0;     // dense: specs must be ids 0..N-1 in order
  std::string name;    // appears in every error about the tensor
  uint64_t bytes = 0;
  ElementType dtype = ElementType::kFloat32;
  Tier home = Tier::kNvme;  // where it is placed when the cache is created
  // Whether it may occupy the device tier. Tensors that never go there (an
  // optimizer's moments, say) are left out of the device pool's size classes, so
  // the device budget is carved only for what can use it.
  bool device = true;
};

// kOverwrite: a write of every byte (a gradient's first contribution in a
// step): a slot is taken in the tier without fetching the old bytes.
enum class AccessMode : uint8_t { kRead, kWrite, kOverwrite };

struct TensorCacheOptions {
  uint64_t device_budget = 0;  // bytes of device memory for slots
  uint64_t host_budget = 0;    // bytes of host memory for slots
  SlotPlanner planner = SlotPlanner::kMaxResident;
  // Slots every size class gets at least, per tier: every tensor must be able to
  // pass through, and a caller that pins k tensors of one class at once needs k.
  uint64_t min_device_slots_per_class = 1;
  uint64_t min_host_slots_per_class = 1;
  uint32_t mover_threads = 2;
  std::chrono::milliseconds io_timeout{30000};  // per tier copy
  // When every slot of a class is pinned by live handles, reserve one more slot
  // (counted in allocations_after_setup) instead of failing with ResourceExhausted.
  bool grow_when_pinned = true;
  // How long a mover waits for a slot held by a tensor that is itself in flight
  // (or that an Acquire is waiting for) before growing the pool instead; it
  // decides again whenever a copy ends, a handle's last pin is released or an
  // Acquire's wait begins or ends (counted in CacheMetrics::slot_waits).
  std::chrono::milliseconds slot_wait{100};
  // Bytes of NVMe for the tensors' extents; nullopt: room for every tensor. The
  // file is reserved at min(budget, every tensor's slot bytes); 0: no file.
  std::optional<uint64_t> nvme_budget;
  // How messages name the budgets (the worker passes its job file's keys).
  // A device or host budget below its tier's least slot plan is
  // InvalidArgument naming the key.
  std::string nvme_budget_key = "nvme_budget";
  std::string host_budget_key = "host_budget";
  std::string device_budget_key = "device_budget";
};

struct TierSet {
  std::unique_ptr<TierStore> device;
  std::unique_ptr<TierStore> host;
  std::unique_ptr<NvmeTier> nvme;
};

class TensorCache;

// Pins one tensor in one tier. Move-only; releases itself when destroyed.
class TensorHandle {
 public:
  TensorHandle() = default;
  TensorHandle(TensorHandle&& other) noexcept { *this = std::move(other); }
  TensorHandle& operator=(TensorHandle&& other) noexcept;
  ~TensorHandle();

  bool valid() const { return cache_ != nullptr; }
  TensorId id() const { return id_; }
  Tier tier() const { return tier_; }
  // Device pointer (device tier) or host pointer (host tier) to bytes() bytes.
  void* data() const { return data_; }
  uint64_t bytes() const { return bytes_; }

 private:
  friend class TensorCache;
  TensorCache* cache_ = nullptr;
  TensorId id_ = 0;
  Tier tier_ = Tier::kDevice;
  AccessMode mode_ = AccessMode::kRead;
  void* data_ = nullptr;
  uint64_t bytes_ = 0;
};

// Completion of a Prefetch. Copyable; may outlive the cache's step but not the cache.
class PrefetchHandle {
 public:
  PrefetchHandle() = default;
  bool ready() const;
  // Waits up to `timeout`: OK once the tensor is in the tier, the move's error, or Timeout.
  Status Wait(std::chrono::milliseconds timeout) const;

 private:
  friend class TensorCache;
  std::shared_ptr<Completion> state_;
};

class TensorCache {
 public:
  // Plans and carves the pools of the device and host tiers from the tensors'
  // size histogram, reserves the NVMe file (min(nvme_budget, every tensor's
  // extent); extents are assigned on first write-back) and starts the mover
  // threads. InvalidArgument when nvme_budget leaves no file and the host slots
  // cannot hold every tensor. REQUIRES: specs[i].id == i.
  static StatusOr<std::unique_ptr<TensorCache>> Create(const TensorCacheOptions& options,
                                                       std::vector<TensorSpec> specs, TierSet tiers);
  ~TensorCache();
  TensorCache(const TensorCache&) = delete;
  TensorCache& operator=(const TensorCache&) = delete;

  // Returns a handle to `id` in `tier` (kDevice or kHost), waiting up to
  // `timeout` when it is not there yet. kWrite invalidates the other copies.
  StatusOr<TensorHandle> Acquire(TensorId id, Tier tier, AccessMode mode,
                                 std::chrono::milliseconds timeout);
  // Ends a handle's pin. FailedPrecondition for an empty or already released handle.
  Status Release(TensorHandle* handle);
  // Starts moving `id` into `tier` (kNvme: write its newest copy back to NVMe).
  PrefetchHandle Prefetch(TensorId id, Tier tier);
  // Evicts `id` from `tier` (kDevice or kHost) now, as a plan that chose its
  // victims does: the copy is written back one tier down first (on the calling
  // thread) when it is the only valid one. Ok when it is not there;
  // FailedPrecondition when a handle pins it or a mover is copying it.
  Status Discard(TensorId id, Tier tier);
  // The tensor's bytes are dead (a gradient its optimizer step has consumed):
  // every copy is dropped without a write-back and it reads as zeros until it is
  // written again. FailedPrecondition when a handle pins it or a mover copies it.
  Status Invalidate(TensorId id);

  // Sets the plan's next-use oracle (nullptr: LRU). REQUIRES: it outlives the cache.
  void SetNextUseOracle(const NextUseOracle* oracle);
  // Returns this step's metrics, resets the per-step counters and the access index.
  CacheMetrics EndStep();
  // The metrics so far in this step, without resetting.
  CacheMetrics Snapshot() const;

  // REQUIRES: id < size().
  const TensorSpec& spec(TensorId id) const;
  size_t size() const;  // number of registered tensors
  bool IsResident(TensorId id, Tier tier) const;
  // Copies of `id` completed into `tier` since the cache was created (a zero
  // fill of a never-written tensor counts for the host). Unchanged between two
  // acquires of a tier means the tensor stayed there in between. REQUIRES: id < size().
  uint64_t Arrivals(TensorId id, Tier tier) const;
  std::string Describe() const;  // the tiers and planner, for logs and reports
  const SizeClassPool& pool(Tier tier) const { return *pools_[static_cast<int>(tier)]; }

 private:
  struct Move;
  struct Entry;

  TensorCache(const TensorCacheOptions& options, TierSet tiers);
  Status Setup(std::vector<TensorSpec> specs);
  // Reserves the NVMe file within the budget (none when it is 0). REQUIRES: pools carved.
  Status ReserveNvme(uint64_t all_extent_bytes);
  void MoverLoop();
  std::shared_ptr<Completion> StartMoveLocked(TensorId id, Tier tier, bool urgent);
  // Sets *deferred when a handle blocks the next copy (the job parks on the
  // tensor) and *await_victim (else kNoVictim) when a prefetch must wait for
  // its victim (VictimToAwait; the job parks on that tensor).
  Status RunMove(std::unique_lock<std::mutex>* lock, TensorId id, Tier target, bool urgent, bool* deferred,
                 int64_t* await_victim);
  // For a prefetch of `e` into `tier` (REQUIRES: it has no slot there): the
  // tensor a demand miss at e's next use would evict, when that tensor cannot be
  // evicted yet (a use before then, a handle, a copy in flight); -1 when a slot
  // is free, no oracle is set, or the victim can go now.
  int64_t VictimToAwait(const Entry& e, Tier tier);
  // Requeues the prefetches parked on `id` as their victim.
  void WakeVictimWaiters(TensorId id);
  // Wakes the movers waiting out TakeSlot's grace, if any, after a change that
  // can free or unblock a slot without a copy ending (a handle's last pin
  // released, an Acquire's wait begun or ended). REQUIRES: mu_ held.
  void WakeSlotWaiters();
  static void NextStep(const Entry& e, Tier target, Tier* from, Tier* to);
  static bool CopyBlocked(const Entry& e, Tier from, Tier to);
  static bool NeedsWriteBack(const Entry& v, Tier tier);
  bool WriteBackFits(const Entry& v, Tier tier) const;
  // `urgent`: someone waits for the copy (an Acquire); else it is a prefetch
  // and TakeSlot applies the Belady-safe rule (see the header comment).
  Status StepToward(std::unique_lock<std::mutex>* lock, Entry* e, Tier from, Tier to, bool urgent);
  Status Copy(std::unique_lock<std::mutex>* lock, Entry* e, Tier from, Tier to, bool urgent);
  Status EnsureExtent(Entry* e, Tier from, Tier to);
  void SettleLate(Entry* e);
  Status WaitLate(std::unique_lock<std::mutex>* lock, Entry* e, std::chrono::steady_clock::time_point deadline);
  StatusOr<uint64_t> TakeSlot(std::unique_lock<std::mutex>* lock, Tier tier, int cls, TensorId for_id, bool urgent);
  // Gives `e` a slot in `tier` (REQUIRES: it has none; lock held, released while evicting).
  Status PlaceInSlot(std::unique_lock<std::mutex>* lock, Entry* e, Tier tier, bool urgent);
  // `after` (may be null): only tensors whose next use is later than *after
  // qualify; `*sooner` is set when a candidate was passed over for that.
  // `*unfit` is set to the first candidate passed over because its write-back
  // to NVMe would exceed the budget.
  Entry* PickVictim(Tier tier, int cls, TensorId for_id, const AccessIndex* after, bool* sooner, Entry** unfit);
  bool HasBusyHolder(Tier tier, int cls, TensorId for_id) const;
  Status Evict(std::unique_lock<std::mutex>* lock, Entry* victim, Tier tier);
  void DropCopy(Entry* e, Tier tier);
  void AddUsed(Tier tier, int64_t delta);
  void ReleaseLocked(TensorId id, Tier tier, AccessMode mode);
  TensorHandle PinLocked(Entry* e, Tier tier, AccessMode mode);
  CacheMetrics MetricsLocked() const;
  TierStore* store(Tier t) const;

  // Constant after Create().
  const TensorCacheOptions options_;
  TierSet tiers_;
  std::unique_ptr<SizeClassPool> pools_[2];  // device, host
  std::vector<std::vector<TensorId>> members_[2];  // per tier and size class: the tensors of that class
  std::vector<std::thread> movers_;

  mutable std::mutex mu_;
  std::condition_variable cv_;          // entry busy flags and the job queue
  std::vector<Entry> entries_;          // guarded by mu_ (specs constant)
  struct Job {
    TensorId id;
    Tier target;
    std::shared_ptr<Completion> state;
    bool urgent = false;  // an Acquire waits on it
    bool waited_for_victim = false;  // counted in prefetches_deferred
  };
  std::deque<Job> jobs_;                // guarded by mu_
  struct VictimWait {
    TensorId victim;
    Job job;
  };
  std::vector<VictimWait> victim_waits_;  // guarded by mu_: prefetches parked on their victim
  bool stop_ = false;                   // guarded by mu_
  int slot_waiters_ = 0;                // guarded by mu_: movers waiting out TakeSlot's grace
  const NextUseOracle* oracle_ = nullptr;  // guarded by mu_
  AccessIndex access_ = 0;              // guarded by mu_: acquires so far this step
  uint64_t clock_ = 0;                  // guarded by mu_: LRU clock
  CacheMetrics metrics_;                // guarded by mu_
  LinkClock links_[kNumLinks];          // guarded by mu_: in Link order
  std::unique_ptr<NvmeExtents> nvme_;   // set in Create; guarded by mu_ (capacity constant)
};

}  // namespace tencache
