// CacheMetrics: what the tensor cache did during one training step — hits and
// misses per tier, bytes moved per link, time callers stalled in acquire, pool
// allocations after setup, and reserved/used bytes per tier. A plain value the
// worker copies into metrics.jsonl; field names match tencache-sim's. Not
// synchronised: the cache fills it under its own lock and hands out copies.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "cachemgr/types.h"

namespace tencache {

struct TierMetrics {
  uint64_t hits = 0;              // acquires that found the tensor already in this tier
  uint64_t misses = 0;            // acquires that had to wait for it to arrive
  uint64_t late = 0;              // of the misses, those that found it already on its way here
                                  // (a prefetch started but not arrived: issued too late to hide)
  uint64_t reserved_bytes = 0;    // carved pool capacity (what the tier holds for us)
  uint64_t used_bytes = 0;        // bytes of tensors occupying slots, at step end
  uint64_t peak_used_bytes = 0;   // maximum of used_bytes during the step
  uint64_t evictions = 0;         // tensors removed from this tier to make room
};

// The busy time of one link: the union of the intervals its copies ran (two
// movers may copy over one link at once). Not synchronised (the cache's lock).
class LinkClock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  void Begin(TimePoint now);  // a copy starts
  void End(TimePoint now);    // REQUIRES: a Begin without its End
  // Busy seconds since the last Restart; a copy still running counts up to `now`.
  double Busy(TimePoint now) const;
  // Busy() becomes 0 at `now`; running copies keep counting from there.
  void Restart(TimePoint now);

 private:
  int active_ = 0;
  TimePoint since_{};
  double busy_ = 0;
};

// What one link carried during the step.
struct LinkMetrics {
  uint64_t bytes = 0;
  // Seconds copies spent on the link, summed over copies (two movers may copy
  // at once, so bytes / seconds is the throughput of one copy, not the link's).
  double seconds = 0;
  // Seconds the link was busy: the union of its copies' intervals (what the
  // step's slowest-lane bound compares with the step time).
  double busy_seconds = 0;
};

struct CacheMetrics {
  uint64_t step = 0;
  TierMetrics tiers[kNumTiers];
  LinkMetrics links[kNumLinks];  // in Link order
  double stall_seconds = 0;           // summed over acquiring threads
  uint64_t prefetches = 0;            // prefetch calls that started a move
  uint64_t prefetches_declined = 0;   // of which declined: room only by evicting a tensor needed sooner
  uint64_t prefetches_deferred = 0;   // of which parked until their victim's last use before them
  uint64_t slot_waits = 0;            // slots a mover had to wait for: held by a tensor in flight or awaited
  uint64_t allocations_after_setup = 0;  // cumulative since the pools were carved
  uint64_t quarantined_slots = 0;     // copies that timed out; their slots stay reserved until each ends (cumulative)

  const TierMetrics& tier(Tier t) const { return tiers[static_cast<int>(t)]; }
  TierMetrics& tier(Tier t) { return tiers[static_cast<int>(t)]; }
  const LinkMetrics& link(Link l) const { return links[static_cast<int>(l)]; }
  LinkMetrics& link(Link l) { return links[static_cast<int>(l)]; }
  // Peak used / reserved of the host tier (0 when nothing is reserved).
  double host_utilization() const;
  // One JSON object, keys as in docs/cachemgr.md ("device_hits", "bytes_nvme_to_host", ...;
  // a link's keys spelled by its LinkNames::cache_key).
  std::string ToJson() const;
};

}  // namespace tencache
