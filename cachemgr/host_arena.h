// HostArena: page-aligned host memory reserved in a few large regions (normally
// one), addressed by the region-tagged offsets of tier.h. The memory behind the
// host tier and the simulated device tier. Regions are never moved or freed
// before the arena is destroyed.
//
// Huge pages: a region of at least kHugePageBytes starts on a 2 MiB boundary and,
// unless the arena was made without them, is advised MADV_HUGEPAGE (best effort:
// the memory works the same without it). Why it matters for O_DIRECT:
// docs/cachemgr.md, "Tiers".
//
// Thread safety: Reserve is serialised internally; Pointer may be called from
// any thread concurrently with Reserve.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "common/status.h"
#include "common/thread_annotations.h"

namespace tencache {

class HostArena {
 public:
  static constexpr size_t kMaxRegions = 64;
  static constexpr uint64_t kHugePageBytes = uint64_t{2} << 20;

  // `huge_pages`: advise MADV_HUGEPAGE on regions of kHugePageBytes or more.
  explicit HostArena(bool huge_pages = true) : huge_pages_(huge_pages) {}
  HostArena(const HostArena&) = delete;
  HostArena& operator=(const HostArena&) = delete;
  ~HostArena();

  // Maps `bytes` (rounded up to 4 KiB) of anonymous memory, 2 MiB-aligned when
  // `bytes` >= kHugePageBytes; returns the region's base offset.
  StatusOr<uint64_t> Reserve(uint64_t bytes, void** base_out) EXCLUDES(mu_);
  // True when at least one region was reserved with the huge-page advice and
  // none of the advice asked for failed (the kernel may lack THP).
  bool huge_pages() const EXCLUDES(mu_);
  // The address of [offset, offset+len), or nullptr when that is not inside one region.
  uint8_t* Pointer(uint64_t offset, uint64_t len) const;
  uint64_t reserved_bytes() const { return reserved_.load(std::memory_order_acquire); }
  size_t regions() const { return count_.load(std::memory_order_acquire); }

 private:
  struct Region {
    uint8_t* base = nullptr;
    uint64_t bytes = 0;
  };
  const bool huge_pages_;
  mutable Mutex mu_;  // serialises Reserve
  int advised_ GUARDED_BY(mu_) = 0;
  int advice_failed_ GUARDED_BY(mu_) = 0;
  std::array<Region, kMaxRegions> regions_{};  // [0, count_) published
  std::atomic<size_t> count_{0};
  std::atomic<uint64_t> reserved_{0};
};

}  // namespace tencache
