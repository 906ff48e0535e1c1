// HostArena: page-aligned host memory reserved in a few large regions (normally
// one), addressed by the region-tagged offsets of tier.h. The memory behind the
// host tier and the simulated device tier. Regions are never moved or freed
// before the arena is destroyed.
//
// Thread safety: Reserve is serialised internally; Pointer may be called from
// any thread concurrently with Reserve.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>

#include "common/status.h"

namespace tencache {

class HostArena {
 public:
  static constexpr size_t kMaxRegions = 64;

  HostArena() = default;
  HostArena(const HostArena&) = delete;
  HostArena& operator=(const HostArena&) = delete;
  ~HostArena();

  // Maps `bytes` (rounded up to 4 KiB) of anonymous memory; returns the region's base offset.
  StatusOr<uint64_t> Reserve(uint64_t bytes, void** base_out);
  // The address of [offset, offset+len), or nullptr when that is not inside one region.
  uint8_t* Pointer(uint64_t offset, uint64_t len) const;
  uint64_t reserved_bytes() const { return reserved_.load(std::memory_order_acquire); }
  size_t regions() const { return count_.load(std::memory_order_acquire); }

 private:
  struct Region {
    uint8_t* base = nullptr;
    uint64_t bytes = 0;
  };
  std::mutex mu_;  // serialises Reserve
  std::array<Region, kMaxRegions> regions_{};  // [0, count_) published
  std::atomic<size_t> count_{0};
  std::atomic<uint64_t> reserved_{0};
};

}  // namespace tencache
