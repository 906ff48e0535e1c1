#include "cachemgr/metrics.h"

#include <nlohmann/json.hpp>

namespace tencache {

void LinkClock::Begin(TimePoint now) {
  if (active_++ == 0) since_ = now;
}

void LinkClock::End(TimePoint now) {
  if (--active_ == 0) busy_ += std::chrono::duration<double>(now - since_).count();
}

double LinkClock::Busy(TimePoint now) const {
  return busy_ + (active_ > 0 ? std::chrono::duration<double>(now - since_).count() : 0.0);
}

void LinkClock::Restart(TimePoint now) {
  busy_ = 0;
  since_ = now;
}

double CacheMetrics::host_utilization() const {
  const TierMetrics& h = tier(Tier::kHost);
  return h.reserved_bytes == 0 ? 0.0 : static_cast<double>(h.peak_used_bytes) / h.reserved_bytes;
}

std::string CacheMetrics::ToJson() const {
  nlohmann::ordered_json j;
  j["step"] = step;
  for (int t = 0; t < kNumTiers; ++t) {
    const std::string p = TierName(static_cast<Tier>(t));
    j[p + "_hits"] = tiers[t].hits;
    j[p + "_misses"] = tiers[t].misses;
    j[p + "_late"] = tiers[t].late;
    j[p + "_reserved_bytes"] = tiers[t].reserved_bytes;
    j[p + "_used_bytes"] = tiers[t].used_bytes;
    j[p + "_peak_used_bytes"] = tiers[t].peak_used_bytes;
    j[p + "_evictions"] = tiers[t].evictions;
  }
  const auto key = [](const char* field, Link l) { return field + std::string(NamesOf(l).cache_key); };
  for (Link l : kLinks) j[key("bytes_", l)] = link(l).bytes;
  for (Link l : kLinks) j[key("seconds_", l)] = link(l).seconds;
  for (Link l : kLinks) j[key("busy_seconds_", l)] = link(l).busy_seconds;
  j["stall_seconds"] = stall_seconds;
  j["prefetches"] = prefetches;
  j["prefetches_declined"] = prefetches_declined;
  j["prefetches_deferred"] = prefetches_deferred;
  j["slot_waits"] = slot_waits;
  j["allocations_after_setup"] = allocations_after_setup;
  j["quarantined_slots"] = quarantined_slots;
  j["host_utilization"] = host_utilization();
  return j.dump();
}

}  // namespace tencache
