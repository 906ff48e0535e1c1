// TensorCache's slots: taking one in a tier's size class, choosing the victim
// (next use, the prefetch rules of tensor_cache.h), evicting with write-back,
// and waking the prefetches parked on a victim.
#include <algorithm>

#include "cachemgr/tensor_cache.h"
#include "cachemgr/tensor_cache_entry.h"
#include "common/byte_size.h"

namespace tencache {

using namespace tensor_cache_internal;  // NOLINT: the cache's own helpers

Status TensorCache::PlaceInSlot(MutexLock* lock, Entry* e, Tier tier, bool urgent) {
  StatusOr<uint64_t> slot = TakeSlot(lock, tier, e->cls[Index(tier)], e->spec.id, urgent);
  if (!slot.ok()) return slot.status().WithContext("tensor '" + e->spec.name + "'");
  e->slot[Index(tier)] = static_cast<int64_t>(*slot);
  AddUsed(tier, static_cast<int64_t>(e->spec.bytes));
  return Status::Ok();
}

StatusOr<uint64_t> TensorCache::TakeSlot(MutexLock* lock, Tier tier, int cls, TensorId for_id,
                                          bool urgent) {
  SizeClassPool& pool = *pools_[Index(tier)];
  const Clock::time_point grace = Clock::now() + options_.slot_wait;
  bool waited = false;  // counted once in slot_waits, however often it is woken
  for (;;) {
    if (std::optional<uint64_t> off = pool.Allocate(cls)) return *off;
    // A prefetch may only evict what is needed after the tensor it brings.
    AcquireIndex mine = kNeverAcquired;
    const bool safe = !urgent && oracle_ != nullptr && entries_[for_id].waiters == 0;
    if (safe) mine = NextUseOf(entries_[for_id]);
    bool sooner = false;
    Entry* unfit = nullptr;
    Entry* victim = PickVictim(tier, cls, for_id, safe ? &mine : nullptr, &sooner, &unfit);
    if (victim != nullptr) {
      TC_RETURN_IF_ERROR(Evict(lock, victim, tier));
      continue;
    }
    if (sooner) {
      ++metrics_.prefetches_declined;
      return Status::ResourceExhausted(std::string(TierName(tier)) + " tier: prefetch declined, every slot of " +
                                       FormatBytes(pool.slot_bytes(cls)) + " holds a tensor needed sooner");
    }
    // Slots held by tensors in flight free up soon; slots pinned by handles may not.
    if (HasBusyHolder(tier, cls, for_id) && Clock::now() < grace) {
      if (!waited) ++metrics_.slot_waits;
      waited = true;
      ++slot_waiters_;
      cv_.wait_until(lock->native(), grace);
      --slot_waiters_;
      continue;
    }
    if (unfit != nullptr)  // the evictable tensors are dirty and NVMe has no room for them
      return nvme_->Exceeded(unfit->spec.name, unfit->slot_bytes)
          .WithContext(std::string(TierName(tier)) + " tier: no slot of " + FormatBytes(pool.slot_bytes(cls)) +
                       " can be freed without writing a tensor to NVMe");
    if (!options_.grow_when_pinned)
      return Status::ResourceExhausted(std::string(TierName(tier)) + " tier: all " +
                                       std::to_string(pool.total_slots(cls)) + " slots of " +
                                       FormatBytes(pool.slot_bytes(cls)) +
                                       " are pinned by live handles or in flight; raise the budget");
    return pool.Grow(cls);
  }
}

void TensorCache::WakeSlotWaiters() {
  if (slot_waiters_ > 0) cv_.notify_all();
}

bool TensorCache::HasBusyHolder(Tier tier, int cls, TensorId for_id) const {
  const int t = Index(tier);
  for (TensorId id : members_[t][cls]) {
    const Entry& c = entries_[id];
    if (id != for_id && c.slot[t] >= 0 && (c.busy || c.waiters > 0) && c.pins[t] == 0) return true;
  }
  return false;
}

AcquireIndex TensorCache::NextUseOf(const Entry& e) const {
  return oracle_->UseAfter(e.spec.id, e.acquired_step == step_ ? e.step_acquires : 0);
}

TensorCache::Entry* TensorCache::PickVictim(Tier tier, int cls, TensorId for_id, const AcquireIndex* after,
                                            bool* sooner, Entry** unfit) {
  const int t = Index(tier);
  Entry* best = nullptr;
  AcquireIndex best_next;
  for (TensorId id : members_[t][cls]) {
    Entry& c = entries_[id];
    SettleLate(&c);  // a late copy that ended frees its tensor for eviction
    // An Acquire waiting for it is about to pin it: the oracle already counts
    // that use as past, so evicting it would read it again at once.
    if (id == for_id || c.slot[t] < 0 || !c.valid[t] || c.pins[t] > 0 || c.busy || c.waiters > 0) continue;
    if (tier == Tier::kDevice && NeedsWriteBack(c, tier) && CopyBlocked(c, Tier::kDevice, Tier::kHost)) continue;
    const AcquireIndex next = oracle_ != nullptr ? NextUseOf(c) : AcquireIndex();
    if (after != nullptr && next <= *after) {
      *sooner = true;
      continue;
    }
    if (!WriteBackFits(c, tier)) {
      if (*unfit == nullptr) *unfit = &c;
      continue;
    }
    const bool better = best == nullptr || next > best_next ||
                        (next == best_next && c.last_use < best->last_use);
    if (better) {
      best = &c;
      best_next = next;
    }
  }
  return best;
}

int64_t TensorCache::VictimToAwait(const Entry& e, Tier tier) {
  const int t = Index(tier);
  const int cls = e.cls[t];
  if (oracle_ == nullptr || pools_[t]->free_slots(cls) > 0) return -1;
  const AcquireIndex use = NextUseOf(e);
  if (use == kNeverAcquired) return -1;
  // The caller pins up to `held` tensors of a class at once, acquired in a row:
  // one used fewer than `held` accesses before `use` may still be pinned then.
  const uint64_t held = t == kHost ? options_.min_host_slots_per_class : options_.min_device_slots_per_class;
  Entry* best = nullptr;
  AcquireIndex best_after;     // best's first use after `use`
  bool best_ready = false;     // best can be evicted now
  for (TensorId id : members_[t][cls]) {
    Entry& c = entries_[id];
    if (id == e.spec.id || c.slot[t] < 0) continue;
    SettleLate(&c);
    const AcquireIndex next = NextUseOf(c);
    AcquireIndex after = next;
    if (next < use) {
      if (use.value() >= held && oracle_->NextUse(id, use - held) < use) continue;  // held at `use`: no victim then
      after = oracle_->NextUse(id, use);
      if (after <= use) continue;  // the oracle cannot place it after `use`: TakeSlot's rule decides
    }
    if (tier == Tier::kHost && !WriteBackFits(c, tier)) continue;  // waiting would not make it fit
    const bool ready = next > use && c.valid[t] && c.pins[t] == 0 && !c.busy && c.waiters == 0 &&
                       !(tier == Tier::kDevice && NeedsWriteBack(c, tier) && CopyBlocked(c, Tier::kDevice, Tier::kHost));
    const bool better = best == nullptr || after > best_after ||
                        (after == best_after && (ready > best_ready || (ready == best_ready && c.last_use < best->last_use)));
    if (better) {
      best = &c;
      best_after = after;
      best_ready = ready;
    }
  }
  if (best == nullptr || best_ready) return -1;
  return static_cast<int64_t>(best->spec.id);
}

void TensorCache::WakeVictimWaiters(TensorId id) {
  if (victim_waits_.empty()) return;
  bool woke = false;
  for (size_t i = victim_waits_.size(); i-- > 0;) {
    if (victim_waits_[i].victim != id) continue;
    jobs_.push_front(std::move(victim_waits_[i].job));  // back to front: the first parked runs first
    victim_waits_.erase(victim_waits_.begin() + static_cast<std::ptrdiff_t>(i));
    woke = true;
  }
  if (woke) cv_.notify_all();
}

// Whether evicting v from `tier` must first write it one tier down: it is the
// only valid copy of bytes somebody wrote (a never-written tensor's zeros are not saved).
bool TensorCache::NeedsWriteBack(const Entry& v, Tier tier) {
  if (!v.initialised) return false;
  return tier == Tier::kDevice ? !v.valid[kHost] && !v.valid[kNvme] : !v.valid[kNvme] && !v.valid[kDev];
}

// False when evicting v from `tier` needs a new NVMe extent beyond the budget.
bool TensorCache::WriteBackFits(const Entry& v, Tier tier) const {
  return tier != Tier::kHost || !NeedsWriteBack(v, tier) || v.nvme_extent >= 0 || nvme_->Fits(v.slot_bytes);
}

// Removes v's copy from `tier`, writing it back one tier down first when it is
// the only valid copy.
Status TensorCache::Evict(MutexLock* lock, Entry* v, Tier tier) {
  const bool only_copy = NeedsWriteBack(*v, tier);
  v->busy = true;
  Status st;
  if (only_copy) st = Copy(lock, v, tier, tier == Tier::kDevice ? Tier::kHost : Tier::kNvme, /*urgent=*/true);
  v->busy = v->late.active;
  cv_.notify_all();
  if (!st.ok()) return st.WithContext("writing back '" + v->spec.name + "' to make room");
  if (v->pins[Index(tier)] > 0) return Status::Ok();  // pinned while we wrote back: keep it, pick again
  DropCopy(v, tier);
  ++metrics_.tiers[Index(tier)].evictions;
  return Status::Ok();
}

void TensorCache::DropCopy(Entry* e, Tier tier) {
  const int t = Index(tier);
  e->valid[t] = false;
  if (e->slot[t] < 0) return;
  pools_[t]->Free(e->cls[t], static_cast<uint64_t>(e->slot[t]));
  e->slot[t] = -1;
  AddUsed(tier, -static_cast<int64_t>(e->spec.bytes));
  WakeVictimWaiters(e->spec.id);  // a slot is free: a prefetch waiting on it may go now
}

void TensorCache::AddUsed(Tier tier, int64_t delta) {
  TierMetrics& m = metrics_.tiers[Index(tier)];
  m.used_bytes = static_cast<uint64_t>(static_cast<int64_t>(m.used_bytes) + delta);
  m.peak_used_bytes = std::max(m.peak_used_bytes, m.used_bytes);
}

}  // namespace tencache
