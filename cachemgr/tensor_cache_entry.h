// Internal to the tensor cache's .cc files: the registry entry of one tensor
// and the helpers its files share. Not part of the cache's interface. An Entry's
// spec is constant after Create; every other field is guarded by TensorCache::mu_.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "cachemgr/tensor_cache.h"

namespace tencache {
namespace tensor_cache_internal {

using Clock = std::chrono::steady_clock;
constexpr int kDev = 0;
constexpr int kHost = 1;
constexpr int kNvme = 2;

inline int Index(Tier t) { return static_cast<int>(t); }

}  // namespace tensor_cache_internal

struct TensorCache::Entry {
  TensorSpec spec;
  int cls[2] = {-1, -1};
  int64_t slot[2] = {-1, -1};  // offset in the device / host store, -1: none
  int64_t nvme_extent = -1;    // offset in the NVMe store, -1: none yet (never written there)
  uint64_t slot_bytes = 0;     // bytes rounded to 4 KiB: slot and extent size
  bool valid[kNumTiers] = {false, false, false};
  bool initialised = false;    // false: no copy anywhere, reads as zeros
  uint32_t pins[2] = {0, 0};        // live handles per tier (readers and writers)
  uint32_t write_pins[2] = {0, 0};  // of which kWrite: that copy is being modified
  bool busy = false;           // a mover is copying to or from it (or a late copy runs)
  // A copy that timed out and may still be running: its source and destination
  // slots stay taken and the tensor busy until it ends (SettleLate). Without a
  // ticket (a device copy) the end cannot be seen: the tensor stays unusable.
  struct Late {
    bool active = false;
    bool has_ticket = false;
    IoTicket ticket;
    Tier to = Tier::kHost;
    std::string what;  // the timeout's message
  } late;
  uint32_t waiters = 0;        // Acquires waiting for it to arrive: its moves are not prefetches then
  uint64_t last_use = 0;
  uint64_t acquired_step = 0;  // the step (TensorCache::step_) step_acquires counts in
  uint64_t step_acquires = 0;  // acquires of it in that step: its next use is the oracle's UseAfter them
  uint64_t arrivals[kNumTiers] = {0, 0, 0};  // completed copies into each tier
  std::shared_ptr<Completion> pending[kNumTiers];
  std::vector<Job> deferred;   // moves parked until a handle on this tensor is released
};

}  // namespace tencache
