#include "cachemgr/host_arena.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "cachemgr/tier.h"

namespace tencache {

HostArena::~HostArena() {
  const size_t n = count_.load(std::memory_order_acquire);
  for (size_t i = 0; i < n; ++i) ::munmap(regions_[i].base, regions_[i].bytes);
}

StatusOr<uint64_t> HostArena::Reserve(uint64_t bytes, void** base_out) {
  MutexLock lock(&mu_);
  const size_t n = count_.load(std::memory_order_relaxed);
  if (n == kMaxRegions)
    return Status::ResourceExhausted("host arena: all " + std::to_string(kMaxRegions) + " regions used");
  bytes = (bytes + 4095) / 4096 * 4096;
  if (bytes == 0) bytes = 4096;
  // A region of whole huge pages' worth starts on a huge-page boundary: map
  // one huge page more than asked and give back the unaligned head and tail.
  const uint64_t align = bytes >= kHugePageBytes ? kHugePageBytes : 4096;
  const uint64_t mapped = bytes + align - 4096;
  void* m = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED)
    return Status::ResourceExhausted("host arena: mmap of " + std::to_string(mapped) +
                                     " bytes: " + std::strerror(errno));
  const uintptr_t start = reinterpret_cast<uintptr_t>(m);
  const uintptr_t aligned = (start + align - 1) / align * align;
  if (aligned > start) ::munmap(m, aligned - start);
  if (start + mapped > aligned + bytes)
    ::munmap(reinterpret_cast<void*>(aligned + bytes), start + mapped - aligned - bytes);
  void* p = reinterpret_cast<void*>(aligned);
  if (huge_pages_ && align == kHugePageBytes) {
    ++advised_;
    if (::madvise(p, bytes, MADV_HUGEPAGE) != 0) ++advice_failed_;
  }
  regions_[n] = Region{static_cast<uint8_t*>(p), bytes};
  count_.store(n + 1, std::memory_order_release);
  reserved_.fetch_add(bytes, std::memory_order_acq_rel);
  if (base_out != nullptr) *base_out = p;
  return RegionBase(n);
}

bool HostArena::huge_pages() const {
  MutexLock lock(&mu_);
  return advised_ > 0 && advice_failed_ == 0;
}

uint8_t* HostArena::Pointer(uint64_t offset, uint64_t len) const {
  const uint64_t r = RegionOf(offset);
  if (r >= count_.load(std::memory_order_acquire)) return nullptr;
  const uint64_t off = RegionOffset(offset);
  const Region& region = regions_[r];
  if (off > region.bytes || len > region.bytes - off) return nullptr;
  return region.base + off;
}

}  // namespace tencache
