// Link: the four copy links between the tiers — host->device, device->host,
// NVMe->host, host->NVMe — in the one order that every per-link table uses:
// the cache's metrics, the worker's link calibration, the simulator's speeds
// and lanes, the run report. Each link has one row of names (LinkNames).
// Header-only constant data; safe from any thread.
#pragma once

#include <array>
#include <cstdint>

namespace tencache {

enum class Link : uint8_t { kH2D, kD2H, kNvmeRead, kNvmeWrite };
constexpr int kNumLinks = 4;
constexpr std::array<Link, kNumLinks> kLinks = {Link::kH2D, Link::kD2H, Link::kNvmeRead, Link::kNvmeWrite};

struct LinkNames {
  const char* key;        // "h2d": step lanes, tencache-sim's --KEY-gbps flags, metrics' bytes_KEY
  const char* cache_key;  // "host_to_device": the cache's metrics.jsonl keys (bytes_, seconds_, busy_seconds_)
  const char* title;      // "h2d", "NVMe read": the run report's tables
  const char* path;       // "host->device", "NVMe read": the run report's calibration lines
};

inline const LinkNames& NamesOf(Link link) {
  static constexpr LinkNames kNames[kNumLinks] = {
      {"h2d", "host_to_device", "h2d", "host->device"},
      {"d2h", "device_to_host", "d2h", "device->host"},
      {"nvme_read", "nvme_to_host", "NVMe read", "NVMe read"},
      {"nvme_write", "host_to_nvme", "NVMe write", "NVMe write"},
  };
  return kNames[static_cast<int>(link)];
}
inline const char* LinkName(Link link) { return NamesOf(link).key; }

}  // namespace tencache
