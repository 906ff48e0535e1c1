#include "cachemgr/tensor_cache.h"

#include <cstring>

#include "cachemgr/tensor_cache_entry.h"
#include "common/byte_size.h"

namespace tencache {

using namespace tensor_cache_internal;  // NOLINT: the cache's own helpers

const char* ElementTypeName(ElementType dtype) {
  switch (dtype) {
    case ElementType::kFloat32: return "float32";
    case ElementType::kFloat16: return "float16";
    case ElementType::kBFloat16: return "bfloat16";
    case ElementType::kInt32: return "int32";
    case ElementType::kInt64: return "int64";
    case ElementType::kUInt8: return "uint8";
  }
  return "unknown";
}


// ---- handles ----

TensorHandle& TensorHandle::operator=(TensorHandle&& other) noexcept {
  if (this != &other) {
    if (cache_ != nullptr) (void)cache_->Release(this);
    cache_ = other.cache_;
    id_ = other.id_;
    tier_ = other.tier_;
    mode_ = other.mode_;
    data_ = other.data_;
    bytes_ = other.bytes_;
    other.cache_ = nullptr;
  }
  return *this;
}

TensorHandle::~TensorHandle() {
  if (cache_ != nullptr) (void)cache_->Release(this);
}

bool PrefetchHandle::ready() const {
  return state_ && state_->done();
}

Status PrefetchHandle::Wait(std::chrono::milliseconds timeout) const {
  if (!state_) return Status::FailedPrecondition("waiting on an empty PrefetchHandle");
  return state_->Wait(timeout, "prefetch");
}

// ---- setup ----

TensorCache::TensorCache(const TensorCacheOptions& options, TierSet tiers)
    : options_(options), tiers_(std::move(tiers)) {}

StatusOr<std::unique_ptr<TensorCache>> TensorCache::Create(const TensorCacheOptions& options,
                                                           std::vector<TensorSpec> specs, TierSet tiers) {
  if (!tiers.device || !tiers.host || !tiers.nvme)
    return Status::InvalidArgument("tensor cache: device, host and nvme tiers are all required");
  if (tiers.device->tier() != Tier::kDevice || tiers.host->tier() != Tier::kHost)
    return Status::InvalidArgument("tensor cache: tier stores given in the wrong roles");
  if (options.mover_threads == 0) return Status::InvalidArgument("tensor cache: mover_threads must be > 0");
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].id != i)
      return Status::InvalidArgument("tensor cache: tensor '" + specs[i].name + "' has id " +
                                     std::to_string(specs[i].id) + "; expected dense id " + std::to_string(i));
    if (specs[i].bytes == 0)
      return Status::InvalidArgument("tensor cache: tensor '" + specs[i].name + "' has 0 bytes");
    if (specs[i].home == Tier::kDevice && !specs[i].device)
      return Status::InvalidArgument("tensor cache: tensor '" + specs[i].name +
                                     "' has home tier device but may not occupy the device tier");
  }
  std::unique_ptr<TensorCache> cache(new TensorCache(options, std::move(tiers)));
  TC_RETURN_IF_ERROR(cache->Setup(std::move(specs)));
  return cache;
}

Status TensorCache::Setup(std::vector<TensorSpec> specs) {
  std::vector<uint64_t> sizes[2];  // the histogram of each tier: device-eligible tensors, all tensors
  for (const TensorSpec& s : specs) {
    if (s.device) sizes[kDev].push_back(s.bytes);
    sizes[kHost].push_back(s.bytes);
  }
  const uint64_t budgets[2] = {options_.device_budget, options_.host_budget};
  const uint64_t min_slots[2] = {options_.min_device_slots_per_class, options_.min_host_slots_per_class};
  for (int t : {kDev, kHost}) {
    const std::vector<SizeClass> classes = BuildHistogram(sizes[t]);
    StatusOr<SlotPlan> plan = PlanSlots(options_.planner, classes, budgets[t], min_slots[t]);
    if (!plan.ok() && plan.status().code() == StatusCode::kResourceExhausted) {  // the budget is the user's
      const std::string& key = t == kDev ? options_.device_budget_key : options_.host_budget_key;
      return Status::InvalidArgument(key + " " + FormatBytes(budgets[t]) + " is below what the " + TierName(Tier(t)) +
                                     " tier needs: " + plan.status().message() + "; raise " + key);
    }
    if (!plan.ok()) return plan.status().WithContext(std::string("tensor cache: ") + TierName(Tier(t)) + " tier");
    TC_ASSIGN_OR_RETURN(pools_[t], SizeClassPool::Create(store(Tier(t)), *plan));
    members_[t].resize(classes.size());
  }
  uint64_t all_extent_bytes = 0;
  entries_.resize(specs.size());
  {
    MutexLock lock(&mu_);
    victim_waits_.reserve(2 * specs.size());  // at most one parked prefetch per tensor and tier: no allocation later
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    Entry& e = entries_[i];
    e.spec = std::move(specs[i]);
    e.slot_bytes = SlotBytesFor(e.spec.bytes);
    all_extent_bytes += e.slot_bytes;
    for (int t : {kDev, kHost}) {
      if (t == kDev && !e.spec.device) continue;  // cls stays -1: never placed there
      e.cls[t] = pools_[t]->ClassOf(e.spec.bytes);
      members_[t][e.cls[t]].push_back(static_cast<TensorId>(i));
    }
  }
  TC_RETURN_IF_ERROR(ReserveNvme(all_extent_bytes));
  for (uint32_t i = 0; i < options_.mover_threads; ++i) movers_.emplace_back([this] { MoverLoop(); });
  // Place tensors in their home tier while slots are free there (zero-filled).
  for (Entry& e : entries_) {
    if (e.spec.home == Tier::kNvme) continue;
    const int h = Index(e.spec.home);
    MutexLock lock(&mu_);
    if (pools_[h]->free_slots(e.cls[h]) == 0 || (h == kDev && pools_[kHost]->free_slots(e.cls[kHost]) == 0))
      continue;
    bool deferred = false;  // no handles exist yet, so nothing can park the move
    int64_t victim = -1;    // an urgent move never waits for a victim
    TC_RETURN_IF_ERROR(RunMove(&lock, e.spec.id, e.spec.home, /*urgent=*/true, &deferred, &victim));
    if (deferred) return Status::Internal("tensor '" + e.spec.name + "': placement blocked by a handle during setup");
  }
  MutexLock lock(&mu_);
  metrics_ = CacheMetrics{};
  for (LinkClock& c : links_) c.Restart(Clock::now());
  for (int t : {kDev, kHost}) metrics_.tiers[t].peak_used_bytes = metrics_.tiers[t].used_bytes = 0;
  for (const Entry& e : entries_)
    for (int t : {kDev, kHost})
      if (e.slot[t] >= 0) AddUsed(Tier(t), static_cast<int64_t>(e.spec.bytes));
  return Status::Ok();
}

Status TensorCache::ReserveNvme(uint64_t all_extent_bytes) {
  nvme_ = std::make_unique<NvmeExtents>(options_.nvme_budget, all_extent_bytes, options_.nvme_budget_key,
                                        options_.host_budget_key);
  if (nvme_->capacity() == 0) {  // no file: the host slots must hold every tensor
    const SizeClassPool& host = *pools_[kHost];
    uint64_t holds = 0;
    for (size_t c = 0; c < host.num_classes(); ++c)
      holds += std::min<uint64_t>(host.total_slots(int(c)), members_[kHost][c].size()) * host.slot_bytes(int(c));
    return nvme_->CheckNoFile(options_.host_budget, holds, all_extent_bytes);
  }
  TC_ASSIGN_OR_RETURN(uint64_t base, tiers_.nvme->Reserve(nvme_->capacity()));
  nvme_->set_base(base);
  // Fixed buffers spare the kernel a page walk per I/O. A refusal is not an
  // error: I/O goes on without them, and the tier's Describe() says why.
  if (pools_[kHost]->reserved_bytes() > 0)
    (void)tiers_.nvme->RegisterBuffers({{tiers_.host->Address(RegionBase(0)), pools_[kHost]->reserved_bytes()}},
                                       options_.io_timeout);
  return Status::Ok();
}

TensorCache::~TensorCache() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : movers_) t.join();
  MutexLock lock(&mu_);
  for (Entry& e : entries_)  // parked behind handles the caller never released
    for (Job& job : e.deferred) job.state->Set(Status::Unavailable("tensor cache is shutting down"));
  for (VictimWait& w : victim_waits_) w.job.state->Set(Status::Unavailable("tensor cache is shutting down"));
}

TierStore* TensorCache::store(Tier t) const {
  switch (t) {
    case Tier::kDevice: return tiers_.device.get();
    case Tier::kHost: return tiers_.host.get();
    case Tier::kNvme: return tiers_.nvme.get();
  }
  return nullptr;
}

std::string TensorCache::Describe() const {
  const std::string nvme = nvme_->capacity() == 0 ? nvme_->Describe()
                                                  : store(Tier::kNvme)->Describe() + " with " + nvme_->Describe();
  return store(Tier::kDevice)->Describe() + " + " + store(Tier::kHost)->Describe() + " + " + nvme +
         ", slots planned by " + SlotPlannerName(options_.planner);
}

// ---- acquire / release / prefetch ----

StatusOr<TensorHandle> TensorCache::Acquire(TensorId id, Tier tier, AccessMode mode,
                                            std::chrono::milliseconds timeout) {
  if (id >= entries_.size())
    return Status::NotFound("tensor id " + std::to_string(id) + " is not registered (the cache holds " +
                            std::to_string(entries_.size()) + ")");
  if (tier == Tier::kNvme)
    return Status::InvalidArgument("tensor '" + entries_[id].spec.name + "': acquire from the nvme tier; "
                                   "expected device or host");
  if (tier == Tier::kDevice && !entries_[id].spec.device)
    return Status::InvalidArgument("tensor '" + entries_[id].spec.name + "': acquire from the device tier, "
                                   "but it was registered as host and NVMe only");
  const int t = Index(tier);
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + timeout;
  MutexLock lock(&mu_);
  Entry& e = entries_[id];
  if (e.acquired_step != step_) {
    e.acquired_step = step_;
    e.step_acquires = 0;
  }
  ++e.step_acquires;
  e.last_use = ++clock_;
  bool missed = false;
  auto account_stall = [&]() REQUIRES(mu_) {
    if (missed) metrics_.stall_seconds += std::chrono::duration<double>(Clock::now() - start).count();
  };
  // While this call waits, a move of the tensor (even one a Prefetch started
  // and a mover is running) is not a prefetch: TakeSlot does not decline it.
  // A mover in TakeSlot treats a tensor an Acquire waits for differently (never
  // a victim, a holder about to be pinned): it decides again when a wait begins or ends.
  struct Waiting {
    TensorCache* cache = nullptr;
    Entry* e = nullptr;
    ~Waiting() {  // runs before `lock` is released
      if (e == nullptr) return;
      --e->waiters;
      cache->WakeSlotWaiters();
    }
  } waiting{this};
  bool retried = false;
  std::shared_ptr<Completion> move;  // the move this call waits on
  for (;;) {
    if (e.valid[t] && !e.busy) {
      if (!missed) ++metrics_.tiers[t].hits;
      account_stall();
      return PinLocked(&e, tier, mode);
    }
    if (mode == AccessMode::kOverwrite && !e.busy && e.pins[t] == 0) {
      // Every byte will be written: a slot, not the old bytes. (A stale copy a
      // reader still pins is waited out like a move into it would be.)
      if (e.slot[t] < 0) {
        e.busy = true;  // no mover touches it while TakeSlot may unlock
        const Status placed = PlaceInSlot(&lock, &e, tier, /*urgent=*/true);
        e.busy = false;
        cv_.notify_all();
        if (!placed.ok()) return placed;
      }
      e.valid[t] = true;
      ++e.arrivals[t];
      if (!missed) ++metrics_.tiers[t].hits;  // nothing had to arrive
      account_stall();
      return PinLocked(&e, tier, mode);
    }
    if (!missed) {
      missed = true;
      ++metrics_.tiers[t].misses;
      if (e.pending[t]) ++metrics_.tiers[t].late;  // a move here was started before this call
      ++e.waiters;
      waiting.e = &e;
      WakeSlotWaiters();
    }
    if (move) {
      bool done = false;
      const Status moved = move->Peek(&done);
      if (done && !moved.ok()) {
        // A prefetch declined before this call began waiting: move it again,
        // now as a demand miss (once; a second refusal is a real one).
        if (moved.code() == StatusCode::kResourceExhausted && !retried) {
          retried = true;
        } else {
          account_stall();
          return moved;
        }
      }
      if (done) move = nullptr;  // it arrived and left again (or was declined): move it once more
    }
    if (!move && !e.valid[t]) move = StartMoveLocked(id, tier, /*urgent=*/true);
    if (!move && e.late.active) {  // a copy of it timed out earlier: wait for it to end
      const Status settled = WaitLate(&lock, &e, deadline);
      if (!settled.ok()) {
        account_stall();
        return settled;
      }
      continue;
    }
    if (cv_.wait_until(lock.native(), deadline) == std::cv_status::timeout && !(e.valid[t] && !e.busy)) {
      account_stall();
      return Status::Timeout("tensor '" + e.spec.name + "': not in the " + TierName(tier) + " tier within " +
                             std::to_string(timeout.count()) + " ms");
    }
  }
}

TensorHandle TensorCache::PinLocked(Entry* e, Tier tier, AccessMode mode) {
  const int t = Index(tier);
  ++e->pins[t];
  if (mode != AccessMode::kRead) {
    ++e->write_pins[t];
    e->initialised = true;
    e->valid[kNvme] = false;
    for (int u : {kDev, kHost})
      if (u != t && e->valid[u]) {
        e->valid[u] = false;
        if (e->pins[u] == 0) DropCopy(e, Tier(u));
      }
  }
  TensorHandle h;
  h.cache_ = this;
  h.id_ = e->spec.id;
  h.tier_ = tier;
  h.mode_ = mode;
  h.data_ = store(tier)->Address(static_cast<uint64_t>(e->slot[t]));
  h.bytes_ = e->spec.bytes;
  return h;
}

Status TensorCache::Release(TensorHandle* handle) {
  if (handle == nullptr || handle->cache_ == nullptr)
    return Status::FailedPrecondition("release of an empty or already released tensor handle");
  if (handle->cache_ != this) return Status::FailedPrecondition("release of a handle from another cache");
  store(handle->tier_)->ConsumerReleased(handle->data_);  // before the slot can be reused
  {
    MutexLock lock(&mu_);
    ReleaseLocked(handle->id_, handle->tier_, handle->mode_);
  }
  handle->cache_ = nullptr;
  handle->data_ = nullptr;
  return Status::Ok();
}

void TensorCache::ReleaseLocked(TensorId id, Tier tier, AccessMode mode) {
  Entry& e = entries_[id];
  const int t = Index(tier);
  --e.pins[t];
  if (mode != AccessMode::kRead) --e.write_pins[t];
  if (e.pins[t] == 0 && !e.valid[t] && e.slot[t] >= 0 && !e.busy) DropCopy(&e, tier);  // stale copy
  if (e.pins[t] == 0) WakeSlotWaiters();  // its slot may be the victim a mover waits for
  WakeVictimWaiters(id);
  if (e.deferred.empty()) return;
  // Parked moves re-check what blocked them; those still blocked park again.
  for (auto it = e.deferred.rbegin(); it != e.deferred.rend(); ++it) jobs_.push_front(std::move(*it));
  e.deferred.clear();
  cv_.notify_all();
}

PrefetchHandle TensorCache::Prefetch(TensorId id, Tier tier) {
  PrefetchHandle h;
  MutexLock lock(&mu_);
  if (id >= entries_.size()) {
    h.state_ = Completion::Done(Status::NotFound("prefetch of tensor id " + std::to_string(id) + ": not registered"));
    return h;
  }
  Entry& e = entries_[id];
  if (tier == Tier::kDevice && !e.spec.device) {
    h.state_ = Completion::Done(Status::InvalidArgument("prefetch of tensor '" + e.spec.name +
                                                 "' to the device tier: registered as host and NVMe only"));
    return h;
  }
  const bool there = tier == Tier::kNvme ? (e.valid[kNvme] || !e.initialised) : e.valid[Index(tier)];
  if (there) {
    h.state_ = Completion::Done(Status::Ok());
    return h;
  }
  ++metrics_.prefetches;
  h.state_ = StartMoveLocked(id, tier, /*urgent=*/false);
  return h;
}

StatusOr<TensorCache::Discarded> TensorCache::Discard(TensorId id, Tier tier) {
  if (tier == Tier::kNvme) return Status::InvalidArgument("discard from the nvme tier: expected device or host");
  MutexLock lock(&mu_);
  if (id >= entries_.size()) return Status::NotFound("discard of tensor id " + std::to_string(id) + ": not registered");
  Entry& e = entries_[id];
  const int t = Index(tier);
  SettleLate(&e);
  if (e.slot[t] < 0 || !e.valid[t]) return Discarded::kGone;
  if (e.pins[t] > 0 || e.busy) return Discarded::kKept;
  TC_RETURN_IF_ERROR(Evict(&lock, &e, tier));
  return e.slot[t] < 0 ? Discarded::kGone : Discarded::kKept;  // kept: pinned during its write-back
}

Status TensorCache::Invalidate(TensorId id) {
  MutexLock lock(&mu_);
  if (id >= entries_.size()) return Status::NotFound("invalidate of tensor id " + std::to_string(id) + ": not registered");
  Entry& e = entries_[id];
  SettleLate(&e);
  if (e.pins[kDev] > 0 || e.pins[kHost] > 0 || e.busy) {
    return Status::FailedPrecondition("tensor '" + e.spec.name + "': pinned or being copied, its bytes kept");
  }
  for (int t : {kDev, kHost}) DropCopy(&e, Tier(t));
  e.valid[kNvme] = false;
  e.initialised = false;
  return Status::Ok();
}

std::shared_ptr<Completion> TensorCache::StartMoveLocked(TensorId id, Tier tier, bool urgent) {
  Entry& e = entries_[id];
  std::shared_ptr<Completion>& pending = e.pending[Index(tier)];
  if (pending) {
    if (urgent) {  // promote a queued prefetch ahead of the others: someone waits on it now
      for (auto it = jobs_.begin(); it != jobs_.end(); ++it)
        if (it->id == id && it->target == tier) {
          Job job = *it;
          job.urgent = true;
          jobs_.erase(it);
          jobs_.push_front(job);
          break;
        }
      for (Job& job : e.deferred)
        if (job.target == tier) job.urgent = true;
      for (auto it = victim_waits_.begin(); it != victim_waits_.end(); ++it)
        if (it->job.id == id && it->job.target == tier) {
          Job job = it->job;
          job.urgent = true;
          victim_waits_.erase(it);
          jobs_.push_front(job);
          cv_.notify_all();
          break;
        }
    }
    return pending;
  }
  if (stop_) return Completion::Done(Status::Unavailable("tensor cache is shutting down"));
  pending = std::make_shared<Completion>();
  Job job{id, tier, pending, urgent};
  if (urgent) jobs_.push_front(job);
  else jobs_.push_back(job);
  cv_.notify_all();
  return pending;
}

void TensorCache::MoverLoop() {
  MutexLock lock(&mu_);
  for (;;) {
    cv_.wait(lock.native(), [&]() REQUIRES(mu_) { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stop_ and drained
    Job job = jobs_.front();
    jobs_.pop_front();
    bool deferred = false;
    int64_t victim = -1;
    Status st = stop_ ? Status::Unavailable("tensor cache is shutting down")
                      : RunMove(&lock, job.id, job.target, job.urgent, &deferred, &victim);
    Entry& e = entries_[job.id];
    if (deferred) {  // still pending: ReleaseLocked requeues it
      e.deferred.push_back(std::move(job));
      continue;
    }
    if (victim >= 0) {  // still pending: WakeVictimWaiters requeues it
      if (!job.waited_for_victim) ++metrics_.prefetches_deferred;
      job.waited_for_victim = true;
      victim_waits_.push_back(VictimWait{static_cast<TensorId>(victim), std::move(job)});
      continue;
    }
    if (e.pending[Index(job.target)] == job.state) e.pending[Index(job.target)].reset();
    job.state->Set(st);
    WakeVictimWaiters(job.id);  // its move ended: a prefetch waiting on it may go now
    cv_.notify_all();
  }
}

// ---- moves ----

// REQUIRES: *lock holds mu_ (released while copying, held again on return).
// Sets *deferred, and returns Ok, when the next step is blocked by a handle
// (see CopyBlocked); the caller parks the job and ReleaseLocked requeues it.
Status TensorCache::RunMove(MutexLock* lock, TensorId id, Tier target, bool urgent,
                            bool* deferred, int64_t* await_victim) {
  Entry& e = entries_[id];
  const int t = Index(target);
  const Clock::time_point deadline = Clock::now() + 4 * options_.io_timeout;
  *deferred = false;
  *await_victim = -1;
  for (;;) {
    const bool there = target == Tier::kNvme ? (e.valid[kNvme] || !e.initialised) : e.valid[t];
    if (there) return Status::Ok();
    if (e.late.active) {
      TC_RETURN_IF_ERROR(WaitLate(lock, &e, deadline));
      continue;
    }
    if (e.busy) {
      if (cv_.wait_until(lock->native(), deadline) == std::cv_status::timeout && e.busy)
        return Status::Timeout("tensor '" + e.spec.name + "': another copy of it did not finish in time");
      continue;
    }
    Tier from, to;
    NextStep(e, target, &from, &to);
    if (CopyBlocked(e, from, to)) {
      *deferred = true;
      return Status::Ok();
    }
    if (!urgent && e.waiters == 0 && to != Tier::kNvme && e.slot[Index(to)] < 0) {
      *await_victim = VictimToAwait(e, to);
      if (*await_victim >= 0) return Status::Ok();
    }
    TC_RETURN_IF_ERROR(StepToward(lock, &e, from, to, urgent));
  }
}

// The copy that brings `e` one tier closer to `target`.
void TensorCache::NextStep(const Entry& e, Tier target, Tier* from, Tier* to) {
  if (target == Tier::kNvme) {
    *from = e.valid[kHost] ? Tier::kHost : Tier::kDevice;
    *to = e.valid[kHost] ? Tier::kNvme : Tier::kHost;
  } else if (e.valid[kHost]) {  // target is the device
    *from = Tier::kHost;
    *to = Tier::kDevice;
  } else {
    *from = (target == Tier::kHost && e.valid[kDev]) ? Tier::kDevice : Tier::kNvme;
    *to = Tier::kHost;
  }
}

// A copy may not read a copy pinned for write (its bytes are changing; the move
// must carry the bytes as of the release), nor write into a slot some handle
// still pins (a stale copy a reader is looking at). Only handles block: a
// mover's own copies are serialised by `busy`.
bool TensorCache::CopyBlocked(const Entry& e, Tier from, Tier to) {
  if (from != Tier::kNvme && e.write_pins[Index(from)] > 0) return true;
  return to != Tier::kNvme && e.slot[Index(to)] >= 0 && e.pins[Index(to)] > 0;
}

// Performs the copy `from` -> `to` of `e` with e->busy set, then drops copies
// that went stale meanwhile.
Status TensorCache::StepToward(MutexLock* lock, Entry* e, Tier from, Tier to, bool urgent) {
  e->busy = true;
  Status st = Copy(lock, e, from, to, urgent);
  e->busy = e->late.active;
  if (e->pins[kDev] == 0 && !e->valid[kDev] && e->slot[kDev] >= 0) DropCopy(e, Tier::kDevice);
  if (e->pins[kHost] == 0 && !e->valid[kHost] && e->slot[kHost] >= 0) DropCopy(e, Tier::kHost);
  cv_.notify_all();
  return st;
}

// Copies e's bytes between adjacent tiers (one end is always the host), taking a
// slot at the destination first. REQUIRES: e->busy, lock held (released while copying).
Status TensorCache::Copy(MutexLock* lock, Entry* e, Tier from, Tier to, bool urgent) {
  const int f = Index(from), t = Index(to);
  TC_RETURN_IF_ERROR(EnsureExtent(e, from, to));
  bool took_slot = false;
  if (to != Tier::kNvme && e->slot[t] < 0) {
    TC_RETURN_IF_ERROR(PlaceInSlot(lock, e, to, urgent));
    took_slot = true;
  }
  const bool zeros = from == Tier::kNvme && !e->initialised;
  const uint64_t nvme_off = static_cast<uint64_t>(e->nvme_extent);
  uint8_t* host = static_cast<uint8_t*>(tiers_.host->Address(static_cast<uint64_t>(e->slot[kHost])));
  const uint64_t dev_off = static_cast<uint64_t>(e->slot[kDev]);
  const std::string& name = e->spec.name;
  const std::chrono::milliseconds timeout = options_.io_timeout;
  const Link link = LinkBetween(from, to);
  LinkClock* busy = zeros ? nullptr : &links_[static_cast<int>(link)];
  if (busy != nullptr) busy->Begin(Clock::now());
  lock->Unlock(&mu_);
  const Clock::time_point copy_start = Clock::now();
  Status st;
  IoTicket io;
  bool has_ticket = false;
  if (zeros) {
    std::memset(host, 0, e->slot_bytes);
  } else if (link == Link::kNvmeRead || link == Link::kNvmeWrite) {
    const bool read = link == Link::kNvmeRead;
    io = read ? tiers_.nvme->SubmitRead(nvme_off, host, e->slot_bytes, name)
              : tiers_.nvme->SubmitWrite(nvme_off, host, e->slot_bytes, name);
    has_ticket = true;
    st = tiers_.nvme->Await(io, /*write=*/!read, name, timeout);
  } else if (link == Link::kH2D) {
    st = tiers_.device->Write(dev_off, host, e->spec.bytes, name, timeout);
  } else {
    st = tiers_.device->Read(dev_off, host, e->spec.bytes, name, timeout);
  }
  const double copy_seconds = std::chrono::duration<double>(Clock::now() - copy_start).count();
  lock->Lock(&mu_);
  if (busy != nullptr) busy->End(Clock::now());
  if (st.ok()) {
    e->valid[t] = true;
    ++e->arrivals[t];
    if (!zeros) {
      metrics_.link(link).bytes += e->spec.bytes;
      metrics_.link(link).seconds += copy_seconds;
    }
    return st;
  }
  (void)f;
  if (st.code() == StatusCode::kTimeout) {
    // The copy may still read its source and land in its destination: both
    // slots stay with the tensor, and no other copy of it starts, until it ends.
    ++metrics_.quarantined_slots;
    e->late.active = true;
    e->late.has_ticket = has_ticket;
    e->late.ticket = io;
    e->late.to = to;
    e->late.what = st.message();
    return st.WithContext("its slots stay reserved until the copy ends");
  }
  if (took_slot) DropCopy(e, to);
  return st;
}

// Ends e's late copy if it has finished: the tensor is no longer busy, the
// destination is valid if the copy succeeded, else its slot is freed.
// REQUIRES: lock held.
void TensorCache::SettleLate(Entry* e) {
  if (!e->late.active || !e->late.has_ticket || !e->late.ticket.ready()) return;
  const Status st = e->late.ticket.Wait(std::chrono::milliseconds(0));
  const Tier to = e->late.to;
  e->late = Entry::Late{};
  e->busy = false;
  if (st.ok()) {
    e->valid[Index(to)] = true;
    ++e->arrivals[Index(to)];
  } else if (to != Tier::kNvme && e->pins[Index(to)] == 0) {
    DropCopy(e, to);
  }
  cv_.notify_all();
}

// Waits (lock released) until e's late copy ends or `deadline`, then settles
// it. Unavailable when it cannot end (a device copy), Timeout at the deadline.
// REQUIRES: e->late.active, lock held.
Status TensorCache::WaitLate(MutexLock* lock, Entry* e, Clock::time_point deadline) {
  if (!e->late.has_ticket) {
    return Status::Unavailable("tensor '" + e->spec.name + "': an earlier copy timed out (" + e->late.what +
                               ") and may still run; its slots stay reserved and the tensor cannot be used");
  }
  const IoTicket ticket = e->late.ticket;
  const std::string what = e->late.what;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  lock->Unlock(&mu_);
  (void)ticket.Wait(std::max(left, std::chrono::milliseconds(0)));
  lock->Lock(&mu_);
  SettleLate(e);
  if (e->late.active)
    return Status::Timeout("tensor '" + e->spec.name + "': an earlier copy that timed out (" + what +
                           ") has not ended yet");
  return Status::Ok();
}

// A first write-back to NVMe takes an extent within the budget (nothing else
// is changed when it does not fit); a read from NVMe needs one unless it is a zero fill.
Status TensorCache::EnsureExtent(Entry* e, Tier from, Tier to) {
  if (e->nvme_extent >= 0 || (from != Tier::kNvme && to != Tier::kNvme)) return Status::Ok();
  if (from == Tier::kNvme)
    return e->initialised ? Status::Internal("tensor '" + e->spec.name + "': no valid copy in any tier") : Status::Ok();
  StatusOr<uint64_t> extent = nvme_->Assign(e->spec.name, e->slot_bytes);
  if (!extent.ok()) return extent.status();
  e->nvme_extent = static_cast<int64_t>(*extent);
  return Status::Ok();
}

// ---- metrics and queries ----

void TensorCache::SetNextUseOracle(const NextUseOracle* oracle) {
  MutexLock lock(&mu_);
  oracle_ = oracle;
}

const TensorSpec& TensorCache::spec(TensorId id) const { return entries_[id].spec; }

size_t TensorCache::size() const { return entries_.size(); }

bool TensorCache::IsResident(TensorId id, Tier tier) const {
  MutexLock lock(&mu_);
  return id < entries_.size() && entries_[id].valid[Index(tier)];
}

uint64_t TensorCache::Arrivals(TensorId id, Tier tier) const {
  MutexLock lock(&mu_);
  return entries_[id].arrivals[Index(tier)];
}

CacheMetrics TensorCache::MetricsLocked() const {
  CacheMetrics m = metrics_;
  for (int t : {kDev, kHost}) {
    m.tiers[t].reserved_bytes = pools_[t]->reserved_bytes();
    m.allocations_after_setup += pools_[t]->allocations_after_setup();
  }
  m.tiers[kNvme].reserved_bytes = tiers_.nvme->reserved_bytes();
  const uint64_t on_nvme = nvme_->used();  // extents written (what counts against the budget)
  m.tiers[kNvme].used_bytes = on_nvme;
  m.tiers[kNvme].peak_used_bytes = std::max(metrics_.tiers[kNvme].peak_used_bytes, on_nvme);
  const Clock::time_point now = Clock::now();
  for (Link l : kLinks) m.link(l).busy_seconds = links_[static_cast<int>(l)].Busy(now);
  return m;
}

CacheMetrics TensorCache::Snapshot() const {
  MutexLock lock(&mu_);
  return MetricsLocked();
}

CacheMetrics TensorCache::EndStep() {
  MutexLock lock(&mu_);
  CacheMetrics m = MetricsLocked();
  CacheMetrics next;
  next.step = metrics_.step + 1;
  next.quarantined_slots = metrics_.quarantined_slots;
  for (int t = 0; t < kNumTiers; ++t) {
    next.tiers[t].used_bytes = metrics_.tiers[t].used_bytes;
    next.tiers[t].peak_used_bytes = metrics_.tiers[t].used_bytes;
  }
  next.tiers[kNvme].peak_used_bytes = m.tiers[kNvme].used_bytes;
  metrics_ = next;
  for (LinkClock& c : links_) c.Restart(Clock::now());
  ++step_;
  return m;
}

}  // namespace tencache
