// TensorCache: the registry of managed tensors and the only way to reach their
// bytes. Each tensor (id, name, bytes, dtype, home tier) has copies in size-class
// slots of the device and host tiers and, once written back, an extent of the
// NVMe file within nvme_budget. As with LevelDB's Cache, Acquire() returns a
// handle that pins the tensor in one tier until it is released; a pinned copy
// is never evicted, never read by a mover while pinned for write, and never
// overwritten. Prefetch() starts a move on a mover thread. Eviction takes the
// resident tensor used furthest ahead (NextUseOracle; LRU without one), and a
// prefetch only the victim a demand miss would take. Tier errors, a full NVMe
// budget and timeouts return a Status naming the tensor. The rules in full
// (paths, dirty copies, parked and declined prefetches, the NVMe budget,
// timed-out copies, handles and movers): docs/cachemgr.md, "Semantics".
//
// Thread safety: every public method may be called from any thread. mu_ guards
// the registry, the pools and the metrics; copies run outside it on the mover
// threads, the tensor marked busy meanwhile.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
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
#include "common/thread_annotations.h"

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
  // What Discard did with the copy.
  enum class Discarded {
    kGone,  // the tier holds no copy of it (dropped now, or it was not there)
    kKept,  // a handle pins it or a mover copies it: it stays, nothing failed
  };
  // Evicts `id` from `tier` (kDevice or kHost) now, as a plan that chose its
  // victims does: the copy is written back one tier down first (on the calling
  // thread) when it is the only valid one. Every error is a failure: the
  // write-back's (an I/O error, an NVMe budget exceeded; the copy stays),
  // InvalidArgument for the NVMe tier, NotFound for an unregistered id.
  StatusOr<Discarded> Discard(TensorId id, Tier tier);
  // The tensor's bytes are dead (a gradient its optimizer step has consumed):
  // every copy is dropped without a write-back and it reads as zeros until it is
  // written again. FailedPrecondition when a handle pins it or a mover copies it.
  Status Invalidate(TensorId id);

  // Sets the plan's next-use oracle (nullptr: LRU). REQUIRES: it outlives the cache.
  void SetNextUseOracle(const NextUseOracle* oracle);
  // Returns this step's metrics, resets the per-step counters and the acquire index.
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
  std::shared_ptr<Completion> StartMoveLocked(TensorId id, Tier tier, bool urgent) REQUIRES(mu_);
  // Sets *deferred when a handle blocks the next copy (the job parks on the
  // tensor) and *await_victim (else kNoVictim) when a prefetch must wait for
  // its victim (VictimToAwait; the job parks on that tensor).
  Status RunMove(MutexLock* lock, TensorId id, Tier target, bool urgent, bool* deferred,
                 int64_t* await_victim) REQUIRES(mu_);
  // For a prefetch of `e` into `tier` (REQUIRES: it has no slot there): the
  // tensor a demand miss at e's next use would evict, when that tensor cannot be
  // evicted yet (a use before then, a handle, a copy in flight); -1 when a slot
  // is free, no oracle is set, or the victim can go now.
  int64_t VictimToAwait(const Entry& e, Tier tier) REQUIRES(mu_);
  // `e`'s next use: the oracle's use after e's acquires so far this step (so
  // that acquires of several threads, in another order than the profiled
  // one, move no other tensor's next use). REQUIRES: oracle_ != nullptr.
  AcquireIndex NextUseOf(const Entry& e) const REQUIRES(mu_);
  // Requeues the prefetches parked on `id` as their victim.
  void WakeVictimWaiters(TensorId id) REQUIRES(mu_);
  // Wakes the movers waiting out TakeSlot's grace, if any, after a change that
  // can free or unblock a slot without a copy ending (a handle's last pin
  // released, an Acquire's wait begun or ended). REQUIRES: mu_ held.
  void WakeSlotWaiters() REQUIRES(mu_);
  static void NextStep(const Entry& e, Tier target, Tier* from, Tier* to);
  static bool CopyBlocked(const Entry& e, Tier from, Tier to);
  static bool NeedsWriteBack(const Entry& v, Tier tier);
  bool WriteBackFits(const Entry& v, Tier tier) const REQUIRES(mu_);
  // `urgent`: someone waits for the copy (an Acquire); else it is a prefetch
  // and TakeSlot applies the Belady-safe rule (see the header comment).
  Status StepToward(MutexLock* lock, Entry* e, Tier from, Tier to, bool urgent) REQUIRES(mu_);
  Status Copy(MutexLock* lock, Entry* e, Tier from, Tier to, bool urgent) REQUIRES(mu_);
  Status EnsureExtent(Entry* e, Tier from, Tier to) REQUIRES(mu_);
  void SettleLate(Entry* e) REQUIRES(mu_);
  Status WaitLate(MutexLock* lock, Entry* e, std::chrono::steady_clock::time_point deadline) REQUIRES(mu_);
  StatusOr<uint64_t> TakeSlot(MutexLock* lock, Tier tier, int cls, TensorId for_id, bool urgent) REQUIRES(mu_);
  // Gives `e` a slot in `tier` (REQUIRES: it has none; lock held, released while evicting).
  Status PlaceInSlot(MutexLock* lock, Entry* e, Tier tier, bool urgent) REQUIRES(mu_);
  // `after` (may be null): only tensors whose next use is later than *after
  // qualify; `*sooner` is set when a candidate was passed over for that.
  // `*unfit` is set to the first candidate passed over because its write-back
  // to NVMe would exceed the budget.
  Entry* PickVictim(Tier tier, int cls, TensorId for_id, const AcquireIndex* after, bool* sooner, Entry** unfit) REQUIRES(mu_);
  bool HasBusyHolder(Tier tier, int cls, TensorId for_id) const REQUIRES(mu_);
  Status Evict(MutexLock* lock, Entry* victim, Tier tier) REQUIRES(mu_);
  void DropCopy(Entry* e, Tier tier) REQUIRES(mu_);
  void AddUsed(Tier tier, int64_t delta) REQUIRES(mu_);
  void ReleaseLocked(TensorId id, Tier tier, AccessMode mode) REQUIRES(mu_);
  TensorHandle PinLocked(Entry* e, Tier tier, AccessMode mode) REQUIRES(mu_);
  CacheMetrics MetricsLocked() const REQUIRES(mu_);
  TierStore* store(Tier t) const;

  // Constant after Create().
  const TensorCacheOptions options_;
  TierSet tiers_;
  std::unique_ptr<SizeClassPool> pools_[2];  // device, host
  std::vector<std::vector<TensorId>> members_[2];  // per tier and size class: the tensors of that class
  std::vector<std::thread> movers_;

  mutable Mutex mu_;
  std::condition_variable cv_;          // entry busy flags and the job queue
  std::vector<Entry> entries_;          // guarded by mu_, except each spec (constant)
  struct Job {
    TensorId id;
    Tier target;
    std::shared_ptr<Completion> state;
    bool urgent = false;  // an Acquire waits on it
    bool waited_for_victim = false;  // counted in prefetches_deferred
  };
  std::deque<Job> jobs_ GUARDED_BY(mu_);
  struct VictimWait {
    TensorId victim;
    Job job;
  };
  std::vector<VictimWait> victim_waits_ GUARDED_BY(mu_);  // prefetches parked on their victim
  bool stop_ GUARDED_BY(mu_) = false;
  int slot_waiters_ GUARDED_BY(mu_) = 0;  // movers waiting out TakeSlot's grace
  const NextUseOracle* oracle_ GUARDED_BY(mu_) = nullptr;
  uint64_t step_ GUARDED_BY(mu_) = 0;      // EndSteps so far
  uint64_t clock_ GUARDED_BY(mu_) = 0;      // LRU clock
  CacheMetrics metrics_ GUARDED_BY(mu_);
  LinkClock links_[kNumLinks] GUARDED_BY(mu_);  // in Link order
  std::unique_ptr<NvmeExtents> nvme_;   // set in Create; guarded by mu_ (capacity constant)
};

}  // namespace tencache
