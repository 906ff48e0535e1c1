// Types shared by the tensor cache and everything that drives it: tensor ids,
// tiers, the link between two tiers, step positions (StepIndex, AcquireIndex)
// and the next-use oracle through which a plan steers eviction. Header-only;
// all types are plain values or pure interfaces.
#pragma once

#include <cstdint>
#include <limits>
#include <ostream>

#include "common/link.h"

namespace tencache {

// Dense ids 0..N-1 assigned by whoever registers the tensors (the worker, the
// simulator), stable across steps.
using TensorId = uint32_t;

enum class Tier : uint8_t { kDevice = 0, kHost = 1, kNvme = 2 };
constexpr int kNumTiers = 3;
inline const char* TierName(Tier t) {
  return t == Tier::kDevice ? "device" : t == Tier::kHost ? "host" : "nvme";
}

// The link a copy from tier `from` to tier `to` crosses (every copy goes
// through host memory). REQUIRES: exactly one of them is Tier::kHost.
constexpr Link LinkBetween(Tier from, Tier to) {
  if (from == Tier::kHost) return to == Tier::kDevice ? Link::kH2D : Link::kNvmeWrite;
  return from == Tier::kDevice ? Link::kD2H : Link::kNvmeRead;
}

// How an acquire uses a tensor. kRead leaves it clean; kWrite reads and
// modifies it (dirty afterwards); kOverwrite writes every byte (a gradient's
// first contribution in a step): a slot is taken in the tier without fetching
// the old bytes.
enum class AccessMode : uint8_t { kRead, kWrite, kOverwrite };
inline const char* AccessModeName(AccessMode m) {
  return m == AccessMode::kRead ? "read" : m == AccessMode::kWrite ? "write" : "overwrite";
}

// A position in a step's sequence of one kind of event, numbered 0, 1, ...
// from the first step on: position k of step s is s * (events per step) + k.
// `Tag` names the sequence, so positions of two sequences do not mix: a
// StepIndex<A> neither converts to nor compares with a StepIndex<B> or an
// integer. Never() is the "no such position" value, after every position.
template <class Tag>
class StepIndex {
 public:
  constexpr StepIndex() = default;
  constexpr explicit StepIndex(uint64_t value) : v_(value) {}
  static constexpr StepIndex Never() { return StepIndex(std::numeric_limits<uint64_t>::max()); }
  // Position `k` of step `step` in a sequence of `per_step` events a step.
  static constexpr StepIndex At(uint64_t step, uint64_t per_step, uint64_t k) { return StepIndex(step * per_step + k); }

  constexpr uint64_t value() const { return v_; }
  // The step it lies in and its position within that step. REQUIRES: per_step > 0.
  constexpr uint64_t step(uint64_t per_step) const { return v_ / per_step; }
  constexpr uint64_t in_step(uint64_t per_step) const { return v_ % per_step; }

  constexpr StepIndex operator+(uint64_t n) const { return StepIndex(v_ + n); }
  constexpr StepIndex operator-(uint64_t n) const { return StepIndex(v_ - n); }  // REQUIRES: n <= value()
  constexpr uint64_t operator-(StepIndex o) const { return v_ - o.v_; }       // REQUIRES: o <= *this
  constexpr StepIndex& operator+=(uint64_t n) { v_ += n; return *this; }
  constexpr StepIndex& operator++() { ++v_; return *this; }
  constexpr StepIndex operator++(int) { StepIndex old = *this; ++v_; return old; }

  friend constexpr bool operator==(StepIndex a, StepIndex b) { return a.v_ == b.v_; }
  friend constexpr bool operator!=(StepIndex a, StepIndex b) { return a.v_ != b.v_; }
  friend constexpr bool operator<(StepIndex a, StepIndex b) { return a.v_ < b.v_; }
  friend constexpr bool operator<=(StepIndex a, StepIndex b) { return a.v_ <= b.v_; }
  friend constexpr bool operator>(StepIndex a, StepIndex b) { return a.v_ > b.v_; }
  friend constexpr bool operator>=(StepIndex a, StepIndex b) { return a.v_ >= b.v_; }
  friend std::ostream& operator<<(std::ostream& os, StepIndex i) {
    return i == Never() ? os << "never" : os << i.v_;
  }

 private:
  uint64_t v_ = 0;
};

// Position among every acquire the cache serves in a step (device and host,
// training thread and update alike): the k-th acquire of a step is acquire k.
// The cache's next-use oracle and victim choice count in these: a tensor's
// next use is the one after its acquires so far this step (UseAfter).
struct AcquireTag {};
using AcquireIndex = StepIndex<AcquireTag>;
constexpr AcquireIndex kNeverAcquired = AcquireIndex::Never();

// Tells whoever evicts when a tensor is next used, in positions of type `Index`.
// Thread safety: implementations are immutable once built; calls may come from
// any thread.
template <class Index>
class NextUseLookup {
 public:
  virtual ~NextUseLookup() = default;
  // The position of the first use of `id` strictly after position `now`, in
  // this step or a later one (positions continue past the step's length), or
  // Index::Never().
  virtual Index NextUse(TensorId id, Index now) const = 0;
  // The position of `id`'s use after the first `uses_done` of a step (in step
  // 0's positions; once the step's uses are done, its first use in step 1), or
  // Index::Never(). Where a step follows the order this is NextUse(id, now)
  // for the uses of `id` at or before `now`; where threads interleave their
  // uses otherwise, a use not yet made stays ahead.
  virtual Index UseAfter(TensorId id, uint64_t uses_done) const = 0;
};

// The cache's: when a tensor is next acquired, so that it can evict the resident
// tensor whose next acquire is furthest away. Set by the worker's plan-driven
// policy from the profiled acquire order; the cache falls back to LRU without one.
using NextUseOracle = NextUseLookup<AcquireIndex>;

}  // namespace tencache
