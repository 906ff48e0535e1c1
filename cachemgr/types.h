// Types shared by the tensor cache and everything that drives it: tensor ids,
// tiers, the link between two tiers, and the next-use oracle through which the scheduler's plan steers
// eviction. Header-only; all types are plain values or pure interfaces.
#pragma once

#include <cstdint>
#include <limits>

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

// Position in the step's access sequence: the k-th acquire of a step is access k.
using AccessIndex = uint64_t;
constexpr AccessIndex kNeverUsed = std::numeric_limits<AccessIndex>::max();

// Tells the cache when a tensor is next used, so that it can evict the resident
// tensor whose next use is furthest away. Implemented by the scheduler's plan
// from the profiled order; the cache falls back to LRU when it has none.
// Thread safety: implementations are immutable once built; calls may come from
// any thread.
class NextUseOracle {
 public:
  virtual ~NextUseOracle() = default;
  // The access index of the first use of `id` strictly after access `now` in this
  // step, or in the next step (indices continue past the step's length), or
  // kNeverUsed.
  virtual AccessIndex NextUse(TensorId id, AccessIndex now) const = 0;
};

}  // namespace tencache
