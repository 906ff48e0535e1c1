// Link: the four copy links between the tiers — host->device, device->host,
// NVMe->host, host->NVMe — in the one order that every per-link table uses:
// the cache's metrics, the worker's link calibration, the simulator's speeds
// and lanes, the run report. Each link has one row of names (LinkNames), and
// a value per link is a PerLink (LinkBytes: the bytes a step moved per link).
// Header-only; the names are constant data, safe from any thread; PerLink is a
// plain value, thread-compatible.
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

// One value per link, indexed by Link; every value starts at T().
template <typename T>
struct PerLink {
  std::array<T, kNumLinks> values{};

  T& operator[](Link link) { return values[static_cast<int>(link)]; }
  const T& operator[](Link link) const { return values[static_cast<int>(link)]; }
  // The sum over the links.
  T Total() const {
    T total{};
    for (const T& v : values) total += v;
    return total;
  }
};
// Bytes moved per link: measured and reported figures (averages, medians) in
// double, the simulator's counts in LinkByteCounts. Metrics and JSON name link
// `l`'s bytes "bytes_" + LinkName(l).
using LinkBytes = PerLink<double>;
using LinkByteCounts = PerLink<uint64_t>;

}  // namespace tencache
